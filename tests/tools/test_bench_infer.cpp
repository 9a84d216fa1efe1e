// The inference benchmark's bookkeeping (tools/bench_infer.h) on a tiny random Qwen3: rates, times and bandwidths
// agree with each other, the cache is left empty, and a cache too small for the run is an Error. Batched decode over
// LoRA adapters (row b with adapter b mod n) through the library and `bench infer --lora ... --batch`.
#include <gtest/gtest.h>

#include "common/lora_test_util.h"
#include "common/test_util.h"
#include "infer/qwen3_cached_lm.h"
#include "io/synth_model.h"
#include "model/qwen3_model.h"
#include "tools/bench_infer.h"

namespace nvfp4lm::test::test_bench_infer {
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

TEST(InferBench, BatchedDecodeOverLoraAdapters) {
  TempDir dir;
  SynthOptions synth;
  synth.seed = 5;
  const Qwen3Config config = qwen3_preset("tiny");
  synth_model(config, dir / "tiny", synth);
  RandomAdapter second;
  second.rank = 8;
  second.seed = 2;
  write_random_adapter(dir / "a", config, RandomAdapter{});
  write_random_adapter(dir / "b", config, second);
  Qwen3Model model = Qwen3Model::load(dir / "tiny");
  InferBenchOptions options;
  options.prompt_tokens = 8;
  options.generate_tokens = 4;
  EXPECT_THROW(run_batched_decode_bench(model, 3, options, DecodeMode::Eager, 2), Error) << "no adapters loaded";
  const std::vector<LoraAdapterSpec> specs = {{"a", dir / "a"}, {"b", dir / "b"}};
  model.set_lora_adapters(std::make_shared<const LoraAdapterSet>(
      LoraAdapterSet::load(specs, model.config(), model.compute_dtype(), model.device())));
  const BatchedDecodeResult result = run_batched_decode_bench(model, 3, options, DecodeMode::Eager, 2);
  EXPECT_EQ(result.batch, 3);
  EXPECT_EQ(result.steps, 3);
  EXPECT_GT(result.tokens_per_second, 0);
  EXPECT_THROW(run_batched_decode_bench(model, 3, options, DecodeMode::Eager, 3), Error) << "3 of 2 adapters";

  // The command line: the adapters named in the table and the JSON.
  const CliResult cli =
      run_cli("bench infer --model '" + (dir / "tiny").string() + "' --lora a='" + (dir / "a").string() +
              "' --lora b='" + (dir / "b").string() + "' --prompt-len 8 --gen 4 --batch 3 --copy-mib 4 --json '" +
              (dir / "bench.json").string() + "'");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("LoRA adapters"), std::string::npos) << cli.out;
  const nlohmann::json json = nlohmann::json::parse(read_file(dir / "bench.json"));
  EXPECT_NE(json.at("lora_adapters").get<std::string>().find("a (rank 4"), std::string::npos) << json.dump();
  EXPECT_EQ(json.at("batched_decode").size(), 2u);  // batch 1 and 3
}

}  // namespace
}  // namespace nvfp4lm::test::test_bench_infer
