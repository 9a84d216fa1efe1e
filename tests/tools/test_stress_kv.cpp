// stress kv (tools/stress_kv.h) on a small NVFP4 model on the CPU: the short matrix passes within a few seconds and
// covers what it promises (lengths around the fused-kernel threshold, rewinds, chat turns, full caches, a refused
// overflow); the check catches a damaged cache (keys overwritten after an operation, through the test hook) and a
// case whose overflow is not refused; the full matrix reaches the context limit (bounded by max_cache).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/stopwatch.h"
#include "model/qwen3_model.h"
#include "tokenizer/tokenizer.h"
#include "tools/stress_kv.h"
#include "tools/tools_test_util.h"

namespace nvfp4lm::test::test_stress_kv {
namespace {

class StressKv : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    model_path_ = quantize_to(synth_chat_model(*dir_, "dense"), *dir_, "nvfp4", ModelFormat::ModeloptNvfp4);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static TempDir* dir_;
  static fs::path model_path_;
};
TempDir* StressKv::dir_ = nullptr;
fs::path StressKv::model_path_;

bool has_op(const StressCase& c, StressOp::Kind kind) {
  return std::any_of(c.ops.begin(), c.ops.end(), [&](const StressOp& op) { return op.kind == kind; });
}

TEST_F(StressKv, ShortMatrixPassesQuickly) {
  const Qwen3Model model = Qwen3Model::load(model_path_);
  const Tokenizer tokenizer = Tokenizer::load(model_path_);
  const auto start = Clock::now();
  const StressKvReport report = run_stress_kv(model, tokenizer, {});
  const double seconds = seconds_since(start);
  ASSERT_TRUE(report.pass()) << stress_kv_table(report);
  EXPECT_LT(seconds, 30.0) << "the default matrix must stay short";
  EXPECT_EQ(report.tolerance_class, ToleranceClass::Fp32);
  EXPECT_EQ(report.decode_path, "forward_cached");
  int64_t rows = 0;
  for (const StressCaseResult& c : report.cases) {
    EXPECT_GT(c.checked_rows, 0) << c.name;
    EXPECT_GT(c.worst.max_abs_reference, 0) << c.name;
    rows += c.checked_rows;
  }
  EXPECT_GT(rows, 100);
  const std::string table = stress_kv_table(report);
  for (const char* part :
       {"prompt 9 + decode 8, cache exactly full", "one token more is refused", "rewind", "three chat turns", "PASS: "})
    EXPECT_NE(table.find(part), std::string::npos) << part << "\n" << table;
  EXPECT_EQ(stress_kv_json(report)["failed"], 0);
}

TEST_F(StressKv, TheMatrixCoversWhatItPromises) {
  const std::vector<StressCase> short_cases = stress_kv_cases(4096, false);
  for (const StressOp::Kind kind : {StressOp::Kind::Rewind, StressOp::Kind::ChatTurn, StressOp::Kind::Overflow})
    EXPECT_TRUE(
        std::any_of(short_cases.begin(), short_cases.end(), [&](const StressCase& c) { return has_op(c, kind); }));
  const std::vector<StressCase> full = stress_kv_cases(4096, true);
  EXPECT_GT(full.size(), short_cases.size() + 40);
  int64_t largest = 0;
  for (const StressCase& c : full) largest = std::max(largest, c.cache_tokens);
  EXPECT_EQ(largest, 4096) << "the full matrix reaches the context limit";
  for (const StressCase& c : stress_kv_cases(4096, true, 300)) EXPECT_LE(c.cache_tokens, 300) << c.name;
  for (const StressCase& c : stress_kv_cases(24, true)) EXPECT_LE(c.cache_tokens, 24) << c.name;
}

TEST_F(StressKv, DamagedCacheIsCaught) {
  const Qwen3Model model = Qwen3Model::load(model_path_);
  const Tokenizer tokenizer = Tokenizer::load(model_path_);
  StressKvOptions options;
  // After each operation of the rewind cases, overwrite the keys of layer 0 at position 2 (a slot every later
  // token attends to): the cached logits then differ from the full forward.
  options.after_op = [](const StressCase& c, KVCache& cache) {
    if (c.name.find("rewind") == std::string::npos || cache.length() < 3) return;
    Tensor keys = cache.keys(0).select(0, 0).select(0, 2);
    std::vector<float> values(static_cast<size_t>(keys.numel()), 3.0f);
    keys.copy_from(Tensor::from_floats(values, keys.shape()));
  };
  const StressKvReport report = run_stress_kv(model, tokenizer, options);
  EXPECT_FALSE(report.pass());
  for (const StressCaseResult& c : report.cases) {
    const bool damaged = c.name.find("rewind") != std::string::npos;
    EXPECT_EQ(c.pass(), !damaged) << c.name << ": " << c.failure;
    if (damaged) {
      EXPECT_NE(c.failure.find("max |Δlogit|"), std::string::npos) << c.failure;
    }
  }
  EXPECT_NE(stress_kv_table(report).find("FAIL: "), std::string::npos);
}

TEST_F(StressKv, OverflowThatIsNotRefusedFails) {
  // A case that asks for an overflow with room left in the cache: nothing refuses it, and the check says so.
  const Qwen3Model model = Qwen3Model::load(model_path_);
  const Tokenizer tokenizer = Tokenizer::load(model_path_);
  StressKvOptions options;
  bool rewound = false;
  options.after_op = [&](const StressCase& c, KVCache& cache) {
    // Gives the full-cache case room again right before its overflow (its second op is the decode that fills it).
    if (c.name.rfind("full cache:", 0) == 0 && cache.length() == 12 && !rewound) {
      cache.set_length(11);
      rewound = true;
    }
  };
  const StressKvReport report = run_stress_kv(model, tokenizer, options);
  const auto it = std::find_if(report.cases.begin(), report.cases.end(),
                               [](const StressCaseResult& c) { return c.name.rfind("full cache:", 0) == 0; });
  ASSERT_NE(it, report.cases.end());
  EXPECT_FALSE(it->pass());
  EXPECT_NE(it->failure.find("were not refused"), std::string::npos) << it->failure;
}

}  // namespace
}  // namespace nvfp4lm::test::test_stress_kv
