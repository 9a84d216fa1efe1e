// parity (tools/parity.h) on a small NVFP4 model on the CPU: every CPU pair runs and passes, the lossless copies give
// the same bits, paths that cannot run say why, and a copy with one corrupted block scale fails as --other, naming
// the pair. Also the measure itself (tools/logit_diff.h) on hand-made logits, and the tolerance flag's parsing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "io/model_copy.h"
#include "tools/parity.h"
#include "tools/parity_baseline.h"
#include "tools/tools_test_util.h"

namespace nvfp4lm::test::test_parity {
namespace {

class Parity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    dense_ = synth_chat_model(*dir_, "dense");
    dat_ = quantize_to(dense_, *dir_, "dat", ModelFormat::Dat);
    modelopt_ = quantize_to(dense_, *dir_, "modelopt", ModelFormat::ModeloptNvfp4);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static ParityOptions options(const fs::path& model) {
    ParityOptions options;
    options.model = model;
    options.new_tokens = 4;
    options.no_cuda_reason = "not asked for in this test";
    options.temp_dir = dir_->path();
    return options;
  }

  // pair name ("cpu-cache vs reference") -> the pair of prompt `p`.
  static std::map<std::string, ParityPair> pairs_of(const ParityReport& report, size_t p) {
    std::map<std::string, ParityPair> pairs;
    for (const ParityPair& pair : report.prompts.at(p).pairs) pairs[pair.path + " vs " + pair.against] = pair;
    return pairs;
  }

  static std::string skip_reason(const ParityReport& report, const std::string& path) {
    for (const ParityPath& p : report.paths)
      if (p.name == path) return p.skipped;
    ADD_FAILURE() << "no path " << path;
    return {};
  }

  static TempDir* dir_;
  static fs::path dense_, dat_, modelopt_;
};
TempDir* Parity::dir_ = nullptr;
fs::path Parity::dense_, Parity::dat_, Parity::modelopt_;

TEST_F(Parity, DatModelPassesEveryCpuPair) {
  const ParityReport report = run_parity(options(dat_));
  ASSERT_TRUE(report.pass()) << parity_table(report);
  ASSERT_EQ(report.prompts.size(), default_parity_prompts().size());
  for (size_t p = 0; p < report.prompts.size(); ++p) {
    const ParityPrompt& prompt = report.prompts[p];
    EXPECT_GT(prompt.prompt_tokens, 5);
    EXPECT_GT(prompt.ids.size(), static_cast<size_t>(prompt.prompt_tokens)) << "a continuation was generated";
    EXPECT_LE(prompt.ids.size(), static_cast<size_t>(prompt.prompt_tokens) + 4);
    const auto pairs = pairs_of(report, p);
    for (const char* name :
         {"cpu-cache vs reference", "cpu-dense vs reference", "cpu-bf16 vs reference", "cpu-int8 vs reference",
          "copy-modelopt vs reference", "copy-compressed-tensors vs copy-modelopt", "copy-dat vs copy-modelopt",
          "copy-bf16 vs reference"}) {
      ASSERT_TRUE(pairs.count(name)) << name << "\n" << parity_table(report);
      const ParityPair& pair = pairs.at(name);
      EXPECT_TRUE(pair.pass()) << name;
      EXPECT_EQ(pair.diff.positions, static_cast<int64_t>(prompt.ids.size())) << name;
      EXPECT_GT(pair.diff.max_abs_reference, 0) << name;
    }
    // The lossless copies run the same kernels on the same bits.
    EXPECT_EQ(pairs.at("copy-modelopt vs reference").diff.max_abs_diff, 0);
    EXPECT_EQ(pairs.at("copy-dat vs copy-modelopt").diff.max_abs_diff, 0);
    EXPECT_EQ(pairs.at("copy-compressed-tensors vs copy-modelopt").diff.max_abs_diff, 0);  // 1 / 1 is exact
    // The cache and the dense weights take other kernels: close, not equal.
    EXPECT_GT(pairs.at("cpu-cache vs reference").diff.max_abs_diff, 0);
    EXPECT_EQ(pairs.at("cpu-cache vs reference").diff.top1_agree, pairs.at("cpu-cache vs reference").diff.positions);
    // BF16 activations in the prefill: further off than fp32 reordering, well inside the bf16-activations bound.
    EXPECT_GT(pairs.at("cpu-bf16 vs reference").diff.max_abs_diff,
              pairs.at("cpu-cache vs reference").diff.max_abs_diff);
    // int8 activations in the decode steps as well: further off still (the prompt's positions are prefilled in BF16,
    // the continuation's decoded in int8).
    EXPECT_GT(pairs.at("cpu-int8 vs reference").diff.max_abs_diff,
              pairs.at("cpu-cache vs reference").diff.max_abs_diff);
  }
  EXPECT_EQ(skip_reason(report, "cuda"), "no CUDA device: not asked for in this test");
  EXPECT_EQ(skip_reason(report, "cuda-graph"), "no CUDA device: not asked for in this test");
  for (const auto& entry : fs::directory_iterator(dir_->path()))
    EXPECT_EQ(entry.path().filename().string().find("nvfp4lm-parity"), std::string::npos)
        << "the copies' scratch directory is removed: " << entry.path();
  const nlohmann::json json = parity_json(report);
  EXPECT_TRUE(json["pass"].get<bool>());
  EXPECT_EQ(json["prompts"][0]["pairs"][0]["path"], "cpu-cache");
}

// The model as training computes it (issue 51, the predecessor's training-path inference): the QAT forward equals what
// its export runs (fp32 class: the same dequantized weights, other kernels), for the NVFP4 .dat and for a dense model;
// the .dat's export moves from the file's own block scales by QAT's group tensor scales (requantized class), a
// dense model's export is its NVFP4 quantization and is judged by nothing. --train-forward off leaves them out.
TEST_F(Parity, TheTrainingForwardIsWhatItsExportRuns) {
  for (const fs::path& model : {dat_, dense_}) {
    SCOPED_TRACE(model.string());
    const bool nvfp4 = model == dat_;
    const ParityReport report = run_parity(options(model));
    ASSERT_TRUE(report.pass()) << parity_table(report);
    for (size_t p = 0; p < report.prompts.size(); ++p) {
      const auto pairs = pairs_of(report, p);
      ASSERT_TRUE(pairs.count("train-forward vs train-export")) << parity_table(report);
      const ParityPair& forward = pairs.at("train-forward vs train-export");
      EXPECT_EQ(forward.tolerance_class, ToleranceClass::Fp32);
      EXPECT_EQ(forward.diff.positions, static_cast<int64_t>(report.prompts[p].ids.size()));
      EXPECT_EQ(forward.diff.top1_agree, forward.diff.positions);
      EXPECT_EQ(pairs.count("train-export vs reference"), nvfp4 ? 1u : 0u);
      if (nvfp4) {
        // Requantized with other tensor scales: different logits, within the class.
        EXPECT_GT(pairs.at("train-export vs reference").diff.max_abs_diff, forward.diff.max_abs_diff);
        EXPECT_EQ(pairs.at("train-export vs reference").tolerance_class, ToleranceClass::Requantized);
      }
    }
    EXPECT_EQ(skip_reason(report, "train-cuda"), "no CUDA device: not asked for in this test");
  }
  ParityOptions off = options(dat_);
  off.train_forward = false;
  const ParityReport without = run_parity(off);
  EXPECT_EQ(skip_reason(without, "train-forward"), "--train-forward off");
  EXPECT_EQ(pairs_of(without, 0).count("train-forward vs train-export"), 0u);
}

// The predecessor's known-good baseline: a passing run written with its build, read back, and a later run checked
// against it: the same model moves nothing (0 at every path), a model with other weights moves every path and the
// greedy tokens, each named; a damaged file is refused naming the field.
TEST_F(Parity, ABaselineSaysWhichPromptsAndPathsMoved) {
  ParityOptions first = options(dat_);
  first.train_forward = false;
  first.record_top_logits = true;
  const ParityReport written = run_parity(first);
  ASSERT_TRUE(written.pass());
  const nlohmann::json json = parity_baseline_json(written, first.new_tokens);
  EXPECT_EQ(json["build"]["version"], NVFP4LM_VERSION);
  EXPECT_EQ(json["prompts"][0]["logits"]["reference"].size(), written.prompts[0].ids.size());
  EXPECT_EQ(json["prompts"][0]["logits"]["reference"][0]["ids"].size(), static_cast<size_t>(kBaselineTopK));
  const fs::path file = dir_->path() / "baseline.json";
  write_file(file, json.dump());
  const ParityBaseline baseline = read_parity_baseline(file);
  ASSERT_EQ(baseline.prompts.size(), written.prompts.size());
  EXPECT_EQ(baseline.prompts[0].ids, written.prompts[0].ids);

  ParityOptions again = options(dat_);
  again.train_forward = false;
  again.baseline = &baseline;
  const ParityReport same = run_parity(again);
  ASSERT_TRUE(same.pass()) << parity_table(same);
  ASSERT_FALSE(same.baseline_moves.empty());
  for (const BaselineMove& move : same.baseline_moves) {
    EXPECT_EQ(move.max_abs_diff, 0) << move.path;  // this build, this model: the same bits
    EXPECT_EQ(move.top1_agree, move.positions) << move.path;
  }
  EXPECT_EQ(same.baseline_moves.front().path, "reference");
  EXPECT_NE(parity_table(same).find("greedy continuation is the baseline's"), std::string::npos);

  ParityOptions other = options(modelopt_);  // the same model quantized with tensor scales: other weights
  other.train_forward = false;
  other.baseline = &baseline;
  const ParityReport moved = run_parity(other);
  EXPECT_FALSE(moved.pass());
  bool reference_moved = false;
  for (const BaselineMove& move : moved.baseline_moves)
    if (move.path == "reference") reference_moved = !move.pass && move.max_abs_diff > 0;
  EXPECT_TRUE(reference_moved) << parity_table(moved);
  EXPECT_NE(moved.failures.back().find("baseline: "), std::string::npos);
  // copy-dat cannot run on a ModelOpt model (its tensor scales): said, not judged.
  EXPECT_NE(parity_table(moved).find("note: copy-dat: in the baseline, not run now"), std::string::npos)
      << parity_table(moved);
  other.tolerances.set(ToleranceClass::Baseline, 10);  // a model followed as it trains: a looser bound
  const ParityReport loose = run_parity(other);
  for (const BaselineMove& move : loose.baseline_moves) {
    if (move.first_divergence < 0) {
      EXPECT_TRUE(move.pass) << move.path;
    }
  }

  nlohmann::json broken = json;
  broken["prompts"][0]["logits"]["reference"].erase(0);
  write_file(file, broken.dump());
  expect_error([&] { read_parity_baseline(file); }, {"baseline.json", "prompts[0].logits.reference", "one entry per"});
  write_file(file, "{}");
  expect_error([&] { read_parity_baseline(file); }, {"baseline.json", "not a parity baseline", "--write-baseline"});
}

TEST_F(Parity, PathsThatCannotRunSayWhy) {
  // ModelOpt weights carry tensor scales: no unchanged .dat copy, the rest runs.
  const ParityReport modelopt = run_parity(options(modelopt_));
  ASSERT_TRUE(modelopt.pass()) << parity_table(modelopt);
  EXPECT_NE(skip_reason(modelopt, "copy-dat").find("tensor scales"), std::string::npos);
  EXPECT_EQ(skip_reason(modelopt, "copy-modelopt"), "");
  EXPECT_EQ(pairs_of(modelopt, 0).at("copy-modelopt vs reference").diff.max_abs_diff, 0);
  // compressed-tensors stores each tensor scale as its reciprocal; nvfp4lm's all read back as themselves, so the
  // compressed-tensors copy is the same model, logits bit for bit.
  const ParityPair compressed = pairs_of(modelopt, 0).at("copy-compressed-tensors vs copy-modelopt");
  EXPECT_TRUE(compressed.pass());
  EXPECT_EQ(scales_moved_by_copy(*open_model(modelopt_), ModelFormat::CompressedTensorsNvfp4), 0u);
  EXPECT_EQ(compressed.diff.max_abs_diff, 0);

  // A dense model: no NVFP4 copies, no separate dense path; the BF16 copy of a BF16 model is the model.
  const ParityReport dense = run_parity(options(dense_));
  ASSERT_TRUE(dense.pass()) << parity_table(dense);
  EXPECT_NE(skip_reason(dense, "cpu-dense").find("dense"), std::string::npos);
  EXPECT_NE(skip_reason(dense, "copy-modelopt").find("no NVFP4 weight"), std::string::npos);
  EXPECT_NE(skip_reason(dense, "copy-dat").find("no NVFP4 weight"), std::string::npos);
  EXPECT_NE(skip_reason(dense, "copy-compressed-tensors").find("no NVFP4 weight"), std::string::npos);
  EXPECT_EQ(pairs_of(dense, 0).at("copy-bf16 vs reference").diff.max_abs_diff, 0);
  EXPECT_NE(parity_table(dense).find("copy-dat       skipped: "), std::string::npos) << parity_table(dense);
}

// One dense model quantized by `quantize` into each NVFP4 format (not one copied from the other): `parity --other`
// finds the same model, every prompt's logits identical.
TEST_F(Parity, TheTwoNvfp4FormatsOfOneModelAreIdentical) {
  const fs::path compressed = quantize_to(dense_, *dir_, "compressed", ModelFormat::CompressedTensorsNvfp4);
  ASSERT_EQ(open_model(compressed)->format(), ModelFormat::CompressedTensorsNvfp4);
  ParityOptions both = options(modelopt_);
  both.other = compressed;
  const ParityReport report = run_parity(both);
  ASSERT_TRUE(report.pass()) << parity_table(report);
  for (size_t p = 0; p < report.prompts.size(); ++p)
    EXPECT_EQ(pairs_of(report, p).at("other vs reference").diff.max_abs_diff, 0) << p;
}

TEST_F(Parity, CorruptedBlockScaleFailsAndNamesThePair) {
  TempDir work;
  const fs::path copy = work / "copy";
  write_model_copy(*open_model(dat_), copy, ModelFormat::ModeloptNvfp4);
  ParityOptions same = options(dat_);
  same.other = copy;
  const ParityReport clean = run_parity(same);
  EXPECT_TRUE(clean.pass()) << "an unchanged copy is the same model: " << parity_table(clean);
  EXPECT_EQ(pairs_of(clean, 0).at("other vs reference").diff.max_abs_diff, 0);

  corrupt_block_scale(copy, "model.layers.1.mlp.down_proj.weight");
  const ParityReport report = run_parity(same);
  EXPECT_FALSE(report.pass());
  ASSERT_FALSE(report.failures.empty());
  for (const std::string& failure : report.failures)
    EXPECT_EQ(failure.rfind("other vs reference (other, prompt ", 0), 0u) << failure;
  const ParityPair other = pairs_of(report, 0).at("other vs reference");
  EXPECT_GT(other.diff.max_abs_diff, other.diff.bound(other.tolerance));
  EXPECT_NE(parity_table(report).find("FAIL"), std::string::npos);
}

TEST_F(Parity, OtherWithAnotherVocabularyIsAnError) {
  TempDir work;
  SynthOptions synth = synth_options(3);
  Qwen3Config config = small_test_config(false);
  config.vocab_size = 1024;
  synth_model(config, work / "wide", synth);
  ParityOptions bad = options(dat_);
  bad.other = work / "wide";
  expect_error([&] { run_parity(bad); }, {"--other", "vocabulary of 1024", "512"});
}

TEST(LogitDiff, MeasuresTheLargestDifferenceAndTheFirstDivergence) {
  // Three positions of four logits; candidates 3 (id 3 is padding, never an argmax).
  const Tensor reference = Tensor::from_floats({1, 0, 0, 9, /**/ 0, 2, 0, 9, /**/ 0, 0, 3, 9}, Shape{3, 4});
  const Tensor same = reference.clone();
  LogitDiff diff = compare_logits(same, reference, 3);
  EXPECT_EQ(diff.max_abs_diff, 0);
  EXPECT_EQ(diff.top1_agree, 3);
  EXPECT_EQ(diff.first_divergence, -1);
  EXPECT_EQ(diff.max_abs_reference, 9);
  EXPECT_TRUE(diff.within(0));

  const Tensor other = Tensor::from_floats({1, 0, 0, 9, /**/ 0, 2, 2.5f, 9, /**/ 0, 0, 3, 9.5f}, Shape{3, 4});
  diff = compare_logits(other, reference, 3);
  EXPECT_FLOAT_EQ(diff.max_abs_diff, 2.5);
  EXPECT_EQ(diff.max_diff_position, 1);
  EXPECT_EQ(diff.top1_agree, 2);
  EXPECT_EQ(diff.first_divergence, 1);
  EXPECT_EQ(diff.token, 2);
  EXPECT_EQ(diff.reference_token, 1);
  EXPECT_TRUE(diff.within(2.5 / 9));
  EXPECT_FALSE(diff.within(2.4 / 9));

  const Tensor broken = Tensor::from_floats(
      {1, 0, 0, 9, /**/ 0, std::numeric_limits<float>::quiet_NaN(), 0, 9, /**/ 0, 0, 3, 9}, Shape{3, 4});
  diff = compare_logits(broken, reference, 3);
  EXPECT_TRUE(diff.non_finite);
  EXPECT_FALSE(diff.within(1e9)) << "NaN fails at any tolerance";
}

TEST(LogitTolerances, FlagValues) {
  LogitTolerances tolerances;
  EXPECT_EQ(tolerances.of(ToleranceClass::Identical), 0);
  EXPECT_EQ(tolerances.of(ToleranceClass::Other), tolerances.of(ToleranceClass::Fp32));
  tolerances.set_from_text("bf16-activations=0.25");
  EXPECT_EQ(tolerances.of(ToleranceClass::Bf16Activations), 0.25);
  tolerances.set_from_text("other=3");
  EXPECT_EQ(tolerances.of(ToleranceClass::Other), 3);
  EXPECT_NE(tolerances.describe().find("other 3"), std::string::npos) << tolerances.describe();
  for (const char* bad : {"fp32", "fp16=1", "fp32=-1", "fp32=nan", "fp32=", "=1"}) {
    try {
      tolerances.set_from_text(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--tolerance"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_parity
