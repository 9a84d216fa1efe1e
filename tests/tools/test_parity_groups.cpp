// parity's bounded memory (tools/parity.h): prompts run in groups whose logits fit max_logit_bytes, so the logits
// held never grow with the number of prompts (300 prompts held every logit of every path: 5.8 GB), and a grouped run
// reports exactly what an ungrouped one does (with every kept logit spilled to disk, as for a prompt longer than the
// budget). Also LogitDiffAccumulator (tools/logit_diff.h) against compare_logits, and KeptLogits' spilled entries.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "io/model_copy.h"
#include "tools/kept_logits.h"
#include "tools/parity.h"
#include "tools/tools_test_util.h"

namespace nvfp4lm::test::test_parity_groups {
namespace {

TEST(ParityGroups, HoldAtMostTheLimitWhateverThePromptCount) {
  const int64_t vocab = 151936, limit = int64_t{256} << 20;
  const std::vector<int64_t> tokens(300, 60);  // the 300 short prompts
  const std::vector<ParityPromptGroup> groups = parity_prompt_groups(tokens, vocab, limit);
  size_t next = 0;
  for (const ParityPromptGroup& group : groups) {
    EXPECT_EQ(group.begin, next);
    ASSERT_GT(group.end, group.begin);
    EXPECT_LE(static_cast<int64_t>(group.end - group.begin) * 60 * vocab * 4, limit);
    next = group.end;
  }
  EXPECT_EQ(next, tokens.size());
  EXPECT_EQ(groups.size(), 43u);  // 7 prompts (255 MiB) a group
  // A prompt bigger than the limit is a group of its own; small ones around it are grouped again.
  const std::vector<ParityPromptGroup> mixed = parity_prompt_groups({10, 1000, 10, 10}, vocab, limit);
  ASSERT_EQ(mixed.size(), 3u);
  EXPECT_EQ(mixed[1].begin, 1u);
  EXPECT_EQ(mixed[1].end, 2u);
  EXPECT_EQ(mixed[2].end, 4u);
  EXPECT_TRUE(parity_prompt_groups({}, vocab, limit).empty());
}

TEST(LogitDiffAccumulator, RowByRowEqualsTheWholeComparison) {
  std::mt19937 random(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int64_t positions = 37, vocab = 50;
  std::vector<float> a(positions * vocab), b(positions * vocab);
  for (float& x : a) x = normal(random);
  for (size_t i = 0; i < b.size(); ++i) b[i] = i % 7 == 0 ? normal(random) : a[i] + 0.01f * normal(random);
  a[20 * vocab + 3] = std::numeric_limits<float>::infinity();
  const LogitDiff whole = compare_logits(Tensor::from_floats(a, Shape{positions, vocab}),
                                         Tensor::from_floats(b, Shape{positions, vocab}), 40);
  LogitDiffAccumulator accumulator;
  for (int64_t t = 0; t < positions; ++t) accumulator.add_row(&a[t * vocab], &b[t * vocab], vocab, 40);
  const LogitDiff& rows = accumulator.diff();
  EXPECT_EQ(rows.positions, whole.positions);
  EXPECT_EQ(rows.max_abs_diff, whole.max_abs_diff);
  EXPECT_EQ(rows.max_diff_position, whole.max_diff_position);
  EXPECT_EQ(rows.max_abs_reference, whole.max_abs_reference);
  EXPECT_EQ(rows.non_finite, whole.non_finite);
  EXPECT_EQ(rows.top1_agree, whole.top1_agree);
  EXPECT_EQ(rows.first_divergence, whole.first_divergence);
  EXPECT_EQ(rows.token, whole.token);
  EXPECT_EQ(rows.reference_token, whole.reference_token);
  EXPECT_TRUE(whole.non_finite);
  EXPECT_GE(whole.first_divergence, 0);
}

TEST(KeptLogits, PastTheBudgetTheyGoToDiskAndCompareTheSame) {
  std::mt19937 random(9);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int64_t positions = 41, vocab = 64;  // 41 rows: two whole slices of 16 read back and a partial one
  auto random_logits = [&] {
    std::vector<float> values(positions * vocab);
    for (float& x : values) x = normal(random);
    return Tensor::from_floats(values, Shape{positions, vocab});
  };
  const Tensor first = random_logits(), second = random_logits(), path = random_logits();
  TempDir dir;
  int scratch_calls = 0;
  std::filesystem::path spilled_file;
  {
    // Room for one entry in memory: the second goes to the scratch directory.
    KeptLogits kept(positions * vocab * 4, [&] {
      ++scratch_calls;
      return dir.path();
    });
    // As parity fills them: a block of rows, then the rest.
    for (const Tensor* logits : {&first, &second}) {
      kept.begin(positions, vocab);
      kept.append(0, logits->narrow(0, 0, 30));
      kept.append(30, logits->narrow(0, 30, positions - 30));
    }
    EXPECT_FALSE(kept.spilled(0));
    ASSERT_TRUE(kept.spilled(1));
    EXPECT_EQ(scratch_calls, 1);
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) spilled_file = entry.path();
    ASSERT_FALSE(spilled_file.empty());
    EXPECT_EQ(std::filesystem::file_size(spilled_file), static_cast<uintmax_t>(positions * vocab * 4));
    for (const auto& [index, reference] : {std::pair<size_t, const Tensor*>{0, &first}, {1, &second}}) {
      LogitDiffAccumulator accumulator;
      kept.compare(index, 0, path.narrow(0, 0, 20), 50, accumulator);
      kept.compare(index, 20, path.narrow(0, 20, positions - 20), 50, accumulator);
      const LogitDiff kept_diff = accumulator.diff();
      const LogitDiff whole = compare_logits(path, *reference, 50);
      EXPECT_EQ(kept_diff.max_abs_diff, whole.max_abs_diff) << index;
      EXPECT_EQ(kept_diff.max_diff_position, whole.max_diff_position) << index;
      EXPECT_EQ(kept_diff.max_abs_reference, whole.max_abs_reference) << index;
      EXPECT_EQ(kept_diff.top1_agree, whole.top1_agree) << index;
      EXPECT_EQ(kept_diff.first_divergence, whole.first_divergence) << index;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(spilled_file)) << "the spilled logits outlive their store";
}

nlohmann::json without_seconds(nlohmann::json report) {
  for (auto& path : report["paths"]) path.erase("seconds");
  return report;
}

TEST(ParityGroups, OnePromptAGroupReportsWhatOneGroupDoes) {
  TempDir dir;
  const fs::path dat = quantize_to(synth_chat_model(dir, "dense"), dir, "dat", ModelFormat::Dat);
  const fs::path other = dir / "other";
  write_model_copy(*open_model(dat), other, ModelFormat::ModeloptNvfp4);
  corrupt_block_scale(other, "model.layers.1.mlp.down_proj.weight");  // failures for every prompt, in order
  ParityOptions options;
  options.model = dat;
  options.other = other;
  options.prompts = {"Hi", "Who are you?", "1 + 1 ="};
  options.new_tokens = 2;
  options.no_cuda_reason = "not asked for in this test";
  options.temp_dir = dir.path();
  const ParityReport together = run_parity(options);
  options.max_logit_bytes = 1;
  const ParityReport apart = run_parity(options);
  EXPECT_FALSE(apart.pass());
  EXPECT_EQ(apart.failures, together.failures);
  EXPECT_EQ(without_seconds(parity_json(apart)).dump(1), without_seconds(parity_json(together)).dump(1));
}

}  // namespace
}  // namespace nvfp4lm::test::test_parity_groups
