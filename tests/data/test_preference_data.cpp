// Preference pairs (data/preference_data.h) with the bundled Qwen3 tokenizer: TRL's three layouts (standard text,
// conversational with a prompt or "messages", implicit prompt) become the same chosen / rejected samples; only the
// completion is scored; lengths, skips and refusals name the line; the loader keeps each pair together through
// shuffling and batching, and --eval-split holds out whole pairs.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "data/data_loader.h"
#include "data/eval_split.h"
#include "data/preference_data.h"
#include "tokenizer/tokenizer_test_util.h"

namespace nvfp4lm::test_preference_data {
namespace {

using test::qwen3_tokenizer;

PreferenceData parse(const std::string& content, DatasetOptions options = {}) {
  if (!options.chat_template) options.chat_template = ChatTemplate::resolve(qwen3_tokenizer(), "qwen3-instruct-2507");
  return parse_preference_data(content, "pairs.jsonl", qwen3_tokenizer(), options);
}

std::string scored_text(const Sample& sample) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < sample.ids.size(); ++i)
    if (sample.train_mask[i]) ids.push_back(sample.ids[i]);
  return qwen3_tokenizer().decode(ids);
}

std::string error_of(const std::string& content) {
  try {
    parse(content);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PreferenceData, TrlsThreeLayoutsGiveTheSamePairs) {
  const std::string standard = R"({"prompt": "Is the sky blue?", "chosen": "Yes.", "rejected": "No."})";
  const std::string conversational =
      R"({"prompt": [{"role": "user", "content": "Is the sky blue?"}], "chosen": [{"role": "assistant", )"
      R"("content": "Yes."}], "rejected": [{"role": "assistant", "content": "No."}]})";
  const std::string messages =
      R"({"messages": [{"role": "user", "content": "Is the sky blue?"}], "chosen": "Yes.", "rejected": "No."})";
  const std::string implicit =
      R"({"chosen": [{"role": "user", "content": "Is the sky blue?"}, {"role": "assistant", "content": "Yes."}],)"
      R"( "rejected": [{"role": "user", "content": "Is the sky blue?"}, {"role": "assistant", "content": "No."}]})";
  std::vector<PreferenceData> all;
  for (const std::string& line : {standard, conversational, messages, implicit}) all.push_back(parse(line + "\n"));
  for (const PreferenceData& data : all) {
    ASSERT_EQ(data.samples.size(), 2u);
    EXPECT_EQ(data.pairs(), 1);
    EXPECT_TRUE(data.summary.preference_pairs);
    EXPECT_EQ(data.samples[0].ids, all[0].samples[0].ids);
    EXPECT_EQ(data.samples[1].ids, all[0].samples[1].ids);
    EXPECT_EQ(data.samples[0].train_mask, all[0].samples[0].train_mask);
    EXPECT_EQ(scored_text(data.samples[0]), "Yes.<|im_end|>");
    EXPECT_EQ(scored_text(data.samples[1]), "No.<|im_end|>");
    EXPECT_EQ(data.samples[0].source_line, 1);
  }
  // The two completions share the prompt's tokens up to where they differ, and score nothing before it.
  const Sample& chosen = all[0].samples[0];
  const Sample& rejected = all[0].samples[1];
  const size_t first_scored =
      std::find(chosen.train_mask.begin(), chosen.train_mask.end(), 1) - chosen.train_mask.begin();
  EXPECT_TRUE(std::equal(chosen.ids.begin(), chosen.ids.begin() + static_cast<std::ptrdiff_t>(first_scored),
                         rejected.ids.begin()));
  EXPECT_EQ(std::find(rejected.train_mask.begin(), rejected.train_mask.end(), 1) - rejected.train_mask.begin(),
            static_cast<std::ptrdiff_t>(first_scored));
}

TEST(PreferenceData, MultiTurnPromptsScoreOnlyTheFinalCompletionAndRawPairsEndWithEos) {
  const std::string line =
      R"({"prompt": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},)"
      R"( {"role": "user", "content": "2+2?"}], "chosen": "4", "rejected": "5"})";
  const PreferenceData data = parse(line + "\n");
  EXPECT_EQ(scored_text(data.samples[0]), "4<|im_end|>");
  EXPECT_EQ(scored_text(data.samples[1]), "5<|im_end|>");

  DatasetOptions raw;
  raw.pair_template = PairTemplate::Raw;
  const PreferenceData text = parse(R"({"prompt": "2+2=", "chosen": "4", "rejected": "5"})", raw);
  EXPECT_EQ(qwen3_tokenizer().decode(text.samples[0].ids), "2+2=4<|im_end|>");
  EXPECT_EQ(scored_text(text.samples[1]), "5<|im_end|>");
}

TEST(PreferenceData, LengthsAndSkipsAreCountedOrStrictErrors) {
  const std::string long_answer(400, 'a');
  const std::string content = R"({"prompt": "Q", "chosen": "A short one.", "rejected": ")" + long_answer + "\"}\n" +
                              R"({"prompt": ")" + std::string(600, 'q') + R"(", "chosen": "x", "rejected": "y"})" +
                              "\n" + R"({"prompt": "Fine", "chosen": "Good.", "rejected": "Bad."})" + "\n";
  DatasetOptions options;
  options.max_tokens = 40;
  const PreferenceData data = parse(content, options);
  EXPECT_EQ(data.summary.records, 3);
  EXPECT_EQ(data.pairs(), 2);  // the second pair's prompt fills seq_len
  EXPECT_EQ(data.summary.skipped_no_trained_tokens, 1);
  EXPECT_GE(data.summary.truncated, 1);
  EXPECT_EQ(data.samples[1].ids.size(), 40u);
  EXPECT_EQ(data.samples[2].source_line, 3);
  options.strict = true;
  EXPECT_THROW(parse(content, options), Error);
  EXPECT_NE(describe_dataset_summary(data.summary).find("3 pairs -> 2 pairs kept (4 completions)"), std::string::npos)
      << describe_dataset_summary(data.summary);
}

TEST(PreferenceData, BrokenPairsAreRefusedNamingTheLine) {
  const std::string ok = R"({"prompt": "Q", "chosen": "A", "rejected": "B"})";
  struct Case {
    std::string line, expected;
  };
  const Case cases[] = {
      {R"({"prompt": "Q", "chosen": "A"})", "missing \"rejected\""},
      {R"({"prompt": "Q", "chosen": "A", "rejected": "  "})", "\"rejected\" is empty"},
      {R"({"prompt": "Q", "chosen": [{"role": "assistant", "content": "A"}], "rejected": "B"})", "must be text too"},
      {R"({"prompt": [{"role": "user", "content": "Q"}], "chosen": [{"role": "user", "content": "A"}], "rejected": "B"})",
       "not \"assistant\""},
      {R"({"prompt": [{"role": "user", "content": "Q"}], "chosen": [], "rejected": "B"})", "a list of 0 messages"},
      {R"({"chosen": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}], "rejected": [{"role": "user", "content": "R"}, {"role": "assistant", "content": "B"}]})",
       "share no first message"},
      {R"({"chosen": "A", "rejected": "B"})", "must be whole conversations"},
      {R"({"prompt": "Q", "messages": [], "chosen": "A", "rejected": "B"})", "both \"prompt\" and \"messages\""},
      {R"(["not", "an object"])", "expected a JSON object"},
      {R"({"prompt": "Q", "chosen": "A", "rejected": )", "bad JSON"},
  };
  for (const Case& c : cases) {
    const std::string error = error_of(ok + "\n\n" + c.line + "\n");
    EXPECT_NE(error.find("pairs.jsonl line 3"), std::string::npos) << c.line << " -> " << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.line << " -> " << error;
  }
  test::TempDir dir;
  test::write_file(dir / "pairs.tsv", "Q\tA\n");
  EXPECT_THROW(read_preference_data(dir / "pairs.tsv", qwen3_tokenizer(), {}), Error);
}

TEST(PreferenceData, TheLoaderKeepsPairsTogetherAndEvalSplitHoldsOutWholePairs) {
  std::string content;
  for (int i = 0; i < 10; ++i)
    content += fmt::format(R"({{"prompt": "Question {}", "chosen": "Good {}", "rejected": "Bad {}"}})", i, i, i) + "\n";
  PreferenceData data = parse(content);
  ASSERT_EQ(data.pairs(), 10);
  std::vector<Sample> samples = data.samples;
  const std::vector<Sample> held_out = hold_out_samples(samples, 0.2, 2);
  ASSERT_EQ(held_out.size(), 4u);  // pairs 4 and 9 (every fifth)
  EXPECT_EQ(held_out[0].source_line, 5);
  EXPECT_EQ(held_out[1].source_line, 5);
  EXPECT_EQ(held_out[3].source_line, 10);
  EXPECT_EQ(samples.size(), 16u);

  DataLoaderOptions options;
  options.batch_size = 4;  // two pairs
  options.seq_len = 64;
  options.packing = false;
  options.group = 2;
  options.seed = 7;
  options.pad_id = 0;
  DataLoader loader(data.samples, options);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> seen;
    bool ended = false;
    while (!ended) {
      const TokenBatch batch = loader.next_batch();
      ASSERT_EQ(batch.rows() % 2, 0);
      for (size_t r = 0; r < batch.sample_indices.size(); r += 2) {
        EXPECT_EQ(batch.sample_indices[r] % 2, 0);  // chosen first
        EXPECT_EQ(batch.sample_indices[r + 1], batch.sample_indices[r] + 1);
        seen.insert(batch.sample_indices[r]);
      }
      ended = batch.ends_epoch;
    }
    EXPECT_EQ(seen.size(), 10u) << "epoch " << epoch;
  }
  EXPECT_NE(loader.epoch_order(0), loader.epoch_order(1));  // shuffled, by pairs
  options.batch_size = 3;
  EXPECT_THROW(DataLoader(data.samples, options), Error);
}

}  // namespace
}  // namespace nvfp4lm::test_preference_data
