// The inference benchmark's bookkeeping (tools/bench_infer.h) on a tiny random Qwen3: rates, times and bandwidths
// agree with each other, the cache is left empty, and a cache too small for the run is an Error.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "infer/qwen3_cached_lm.h"
#include "io/synth_model.h"
#include "model/qwen3_model.h"
#include "tools/bench_infer.h"

namespace nvfp4lm::test {
namespace {

TEST(InferBench, ReportsConsistentNumbers) {
  TempDir dir;
  SynthOptions synth;
  synth.seed = 5;
  synth_model(qwen3_preset("tiny"), dir / "tiny", synth);
  const Qwen3Model model = Qwen3Model::load(dir / "tiny");
  Qwen3CachedLm lm(model, 16 + 5 - 1);
  InferBenchOptions options;
  options.prompt_tokens = 16;
  options.generate_tokens = 5;
  InferBenchResult result = run_infer_bench(lm, 1000000, options);
  EXPECT_EQ(lm.length(), 0);
  EXPECT_GT(result.prefill_tokens_per_second, 0);
  EXPECT_GT(result.decode_tokens_per_second, 0);
  EXPECT_NEAR(result.prefill_tokens_per_second * result.prefill_seconds, 16, 1e-6);
  EXPECT_NEAR(result.decode_tokens_per_second * result.decode_seconds, 4, 1e-6);
  EXPECT_NEAR(result.weight_gb_per_s, 1e6 * result.decode_tokens_per_second / 1e9, 1e-9);
  EXPECT_GE(result.time_to_first_token_seconds, result.prefill_seconds);
  set_copy_ceiling(result, measure_copy_bandwidth(Device::cpu(), 16u << 20));
  EXPECT_GT(result.copy.gb_per_s, 0.1);
  EXPECT_NEAR(result.percent_of_copy, 100 * result.weight_gb_per_s / result.copy.gb_per_s, 1e-9);
  const auto json = infer_bench_json(result);
  EXPECT_EQ(json["generated_tokens"], 5);
  EXPECT_NE(infer_bench_table(result).find("decode"), std::string::npos);
  // Too small a cache is an Error, not an overflow.
  Qwen3CachedLm small(model, 8);
  EXPECT_THROW(run_infer_bench(small, 1, options), Error);
}

}  // namespace
}  // namespace nvfp4lm::test
