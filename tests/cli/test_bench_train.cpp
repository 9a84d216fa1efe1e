// `bench train` end to end through the real executable on the tiny preset (a random model built in memory): the
// header line, the table, the JSON fields and their consistency (the FLOP count against the formula, tokens/s
// against the step time, a ratio to the GEMM ceiling in a sane range, a loss near ln(vocab) at the random init),
// the other QAT / optimizer / master settings, and one-line errors for bad flags and for --device cuda without a
// usable GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "io/hf_config.h"

namespace nvfp4lm::test::test_bench_train {
namespace {

constexpr const char* kBase = "bench train --preset tiny --seq-len 32 --batch 2 --steps 2 --warmup-steps 1 ";

// A bench that fails prints no table or JSON.
void expect_error_without_output(const CliResult& result, std::initializer_list<std::string> parts) {
  expect_one_line_error(result, parts);
  EXPECT_EQ(result.out, "");
}

TEST(CliBenchTrain, JsonFieldsAreConsistent) {
  const CliResult result = run_cli(std::string(kBase) + "--json -");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err.rfind("nvfp4lm bench train: device cpu, compute path cpu/dequant-gemm, precision fp32", 0), 0u)
      << result.err;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["benchmark"], "train");
  EXPECT_EQ(json["model"], "preset:tiny");
  EXPECT_EQ(json["qat"], "w4a16");
  EXPECT_EQ(json["tokens_per_step"], 64);
  EXPECT_EQ(json["steps"], 2);
  ASSERT_EQ(json["step_ms_each"].size(), 2u);

  // The FLOP count of one step, from the formula in bench_train.h.
  const Qwen3Config config = qwen3_preset("tiny");
  const double tokens = 64, layers = static_cast<double>(config.num_hidden_layers);
  const double linear =
      layers * static_cast<double>(config.attention_parameters_per_layer() + config.mlp_parameters_per_layer());
  const double head = static_cast<double>(config.vocab_size * config.hidden_size);
  const double attention = 6.0 * layers * 2 * 32.0 * 32.0 * static_cast<double>(config.num_attention_heads) *
                           static_cast<double>(config.head_dim);
  const double flops = 6.0 * (linear + head) * tokens + attention;
  EXPECT_DOUBLE_EQ(json["flops_per_step"].get<double>(), flops);
  EXPECT_DOUBLE_EQ(json["flops_per_step_attention"].get<double>(), attention);
  EXPECT_EQ(json["matmul_parameters"].get<double>(), linear + head);
  EXPECT_EQ(json["trained_parameters"], config.total_parameters());

  const double step_ms = json["step_ms"].get<double>();
  const double tokens_per_s = json["tokens_per_s"].get<double>();
  EXPECT_GT(tokens_per_s, 0);
  EXPECT_NEAR(tokens_per_s, tokens / (step_ms / 1e3), 1e-6 * tokens_per_s);
  const double parts =
      json["forward_backward_ms"].get<double>() + json["optimizer_ms"].get<double>() + json["refresh_ms"].get<double>();
  EXPECT_NEAR(parts, step_ms, 1e-6 * step_ms);
  EXPECT_GT(json["forward_backward_ms"].get<double>(), 0);
  EXPECT_GT(json["refresh_ms"].get<double>(), 0);  // QAT re-quantizes every step
  EXPECT_NEAR(json["achieved_gflop_per_s"].get<double>(), flops / (step_ms / 1e3) / 1e9,
              1e-6 * json["achieved_gflop_per_s"].get<double>());

  ASSERT_EQ(json["gemms"].size(), 2u);
  double best = 0;
  for (const auto& gemm : json["gemms"]) {
    EXPECT_GT(gemm["gflop_per_s"].get<double>(), 0);
    EXPECT_NE(gemm["method"].get<std::string>().find("cblas_sgemm"), std::string::npos);
    best = std::max(best, gemm["gflop_per_s"].get<double>());
  }
  EXPECT_EQ(json["gemms"][1]["n"], config.intermediate_size);
  EXPECT_EQ(json["gemms"][1]["k"], config.hidden_size);
  EXPECT_DOUBLE_EQ(json["ceiling_gflop_per_s"].get<double>(), best);
  const double ratio = json["ratio_of_ceiling"].get<double>();
  EXPECT_GT(ratio, 0);
  EXPECT_LT(ratio, 1.5);

  // Random init: the loss is about ln(vocab); three small steps on random tokens keep it there.
  const double ln_vocab = std::log(static_cast<double>(config.vocab_size));
  EXPECT_NEAR(json["first_loss"].get<double>(), ln_vocab, 0.5);
  EXPECT_NEAR(json["last_loss"].get<double>(), ln_vocab, 0.5);

  const auto& phases = json["memory_phase_peak_bytes"];
  for (const char* phase : {"load", "forward", "backward", "optimizer", "refresh"}) {
    ASSERT_TRUE(phases.contains(phase)) << phases.dump();
    EXPECT_GT(phases[phase].get<double>(), 0) << phase;
    EXPECT_LE(phases[phase].get<double>(), json["peak_device_bytes"].get<double>()) << phase;
  }
  // Masters + gradients + two fp32 moments, at least, are held from the optimizer step on.
  EXPECT_EQ(json["optimizer_state_bytes"].get<double>(), 8.0 * static_cast<double>(config.total_parameters()));
  EXPECT_GE(phases["optimizer"].get<double>(), 16.0 * static_cast<double>(config.total_parameters()));
  EXPECT_GT(json["peak_rss_bytes"].get<double>(), json["peak_device_bytes"].get<double>());
}

TEST(CliBenchTrain, OtherSettingsAndTable) {
  TempDir dir;
  const std::string json_path = (dir.path() / "bench.json").string();
  const CliResult result =
      run_cli(std::string(kBase) + "--qat off --optimizer adamw8bit --master bf16 --json '" + json_path + "'");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err.rfind("nvfp4lm bench train: device cpu, compute path cpu/dense, precision fp32 activations, "
                             "bf16 (stochastic rounding) master weights",
                             0),
            0u)
      << result.err;
  for (const char* part : {"tokens per step", "forward+backward", "QAT refresh", "tokens/s", "GFLOP/s", "GEMM ceiling",
                           "square 2048", "achieved / best GEMM", "peak memory, forward", "host RSS", "wrote"})
    EXPECT_NE(result.out.find(part), std::string::npos) << part << " not in:\n" << result.out;
  const nlohmann::json json = nlohmann::json::parse(read_file(json_path));
  EXPECT_EQ(json["compute_path"], "cpu/dense");
  EXPECT_EQ(json["optimizer"], "adamw8bit");
  EXPECT_EQ(json["master"], "bf16");
  // 8-bit moments: well under the 8 bytes per parameter of fp32 AdamW.
  const Qwen3Config config = qwen3_preset("tiny");
  EXPECT_LT(json["optimizer_state_bytes"].get<double>(), 4.0 * static_cast<double>(config.total_parameters()));
  EXPECT_GT(json["tokens_per_s"].get<double>(), 0);
}

TEST(CliBenchTrain, BadFlagsAreClearErrors) {
  expect_error_without_output(run_cli("bench train --seq-len 8 --batch 1"), {"--model", "--preset"});
  expect_error_without_output(run_cli("bench train --preset tiny --model x --seq-len 8 --batch 1"),
                              {"--model", "--preset"});
  expect_error_without_output(run_cli("bench train --preset nope --seq-len 8 --batch 1"), {"nope", "tiny"});
  expect_error_without_output(run_cli("bench train --preset tiny --seq-len 8 --batch 1 --steps 0"), {"--steps"});
  expect_error_without_output(run_cli("bench train --preset tiny --seq-len 8 --batch 1 --warmup-steps -1"),
                              {"--warmup-steps"});
  expect_error_without_output(run_cli("bench train --preset tiny --seq-len 0 --batch 2"), {"--seq-len"});
  expect_error_without_output(run_cli("bench train --preset tiny --seq-len 8 --batch 0"), {"--batch"});
  expect_error_without_output(run_cli("bench train --preset tiny --seq-len 5000 --batch 1"),
                              {"--seq-len 5000", "4096"});
  expect_error_without_output(run_cli(std::string(kBase) + "--qat w2"), {"w2", "w4a16"});
  expect_error_without_output(run_cli(std::string(kBase) + "--optimizer sgd"), {"--optimizer", "adamw8bit"});
  expect_error_without_output(run_cli(std::string(kBase) + "--master fp16"), {"--master", "bf16"});
  expect_error_without_output(run_cli(std::string(kBase) + "--lr -1"), {"--lr"});
  expect_error_without_output(run_cli("bench train --model /nonexistent/model --seq-len 8 --batch 1"),
                              {"/nonexistent/model"});
  const CliResult missing = run_cli("bench train --preset tiny --batch 1");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("--seq-len"), std::string::npos) << missing.err;
}

TEST(CliBenchTrain, CudaWithoutAGpuIsAClearError) {
  const std::optional<std::string> no_gpu = no_gpu_environment();
  if (!no_gpu) GTEST_SKIP() << "a GPU is present";
  const CliResult result = run_cli(std::string(kBase) + "--device cuda", "", *no_gpu);
  expect_error_without_output(result, {"--device cuda"});
  EXPECT_TRUE(result.err.find("without CUDA") != std::string::npos || result.err.find("no GPU") != std::string::npos)
      << result.err;
}

}  // namespace
}  // namespace nvfp4lm::test::test_bench_train
