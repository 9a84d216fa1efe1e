// `nvfp4lm bench <what>`: throughput and memory benchmarks, each printing its numbers next to a ceiling measured in
// the same run, as a table on stdout and optionally JSON. Subcommands register with BenchRegistration
// (cli/cli_common.h); this file holds the `bench` command itself and `bench infer`. `bench train` (the training
// step) is added by its own file, cmd_bench_train.cpp, with `BenchRegistration bench_train_registration("train", ...)`.
//
// bench infer (--model M | --preset P [--nvfp4]) --prompt-len N --gen G: prefill tok/s, decode tok/s, time to
// first token, peak memory, and the weight bandwidth a decode step achieves against a copy bandwidth measured in
// the same run (tools/bench_infer.h). --preset synthesises a random model of that shape in a temporary directory
// first, quantized to NVFP4 with --nvfp4 (BenchModel, cli_common.h).
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "infer/qwen3_cached_lm.h"
#include "io/hf_config.h"
#include "ops/cpu_backend.h"
#include "tools/bench_infer.h"

namespace nvfp4lm::cli {

std::vector<BenchSpec>& bench_registry() {
  static std::vector<BenchSpec> registry;
  return registry;
}

namespace {

struct BenchInferCliOptions {
  std::string model;
  std::string preset;
  bool nvfp4 = false;
  std::string config;
  ModelFlags cpu;  // --cpu-matmul only
  DeviceFlags device;
  std::string cuda_graph = "on";
  bool deterministic = false;
  InferBenchOptions bench;
  std::string json;
  bool overwrite = false;
  uint64_t copy_mib = 256;
  std::vector<int64_t> batches;   // --batch: batched decode sizes measured after the batch-1 run
  std::vector<std::string> lora;  // --lora [NAME=]DIR, repeated
};

int run_bench_infer(const BenchInferCliOptions& cli) {
  check_bench_model_flags("bench infer", cli.model, cli.preset, cli.nvfp4);
  check_bench_json_path(cli.json, cli.overwrite, cli.model);
  const Device device = setup_device(cli.device);
  set_deterministic(device, cli.deterministic);

  // The benchmark feeds token ids: no tokenizer for a preset.
  const BenchModel bench_model(cli.model, cli.preset, cli.nvfp4, /*with_tokenizer=*/false);
  ModelFlags flags;
  flags.model = bench_model.path();
  flags.config = cli.config;
  flags.cpu_matmul = cli.cpu.cpu_matmul;
  flags.w4a4 = cli.cpu.w4a4;
  flags.lora = cli.lora;
  const Qwen3Model model = load_model("bench infer", flags, device);
  const int adapters = model.lora_adapters() ? model.lora_adapters()->count() : 0;
  if (!bench_model.note().empty()) log::info("{}", bench_model.note());
  const int64_t tokens = cli.bench.prompt_tokens + cli.bench.generate_tokens;
  NVFP4LM_CHECK(tokens - 1 <= model.config().max_position_embeddings,
                "--prompt-len {} + --gen {} exceed the model's context of {} tokens", cli.bench.prompt_tokens,
                cli.bench.generate_tokens, model.config().max_position_embeddings);
  // With adapters the single sequence runs with the first; batched decode spreads them over the rows.
  Qwen3CachedLm lm(model, tokens - 1, {}, decode_mode_for(device, cli.cuda_graph), adapters > 0 ? 0 : kNoLoraAdapter);
  log::info("bench infer: prompt {} tokens, {} generated (greedy, no EOS stop), seed {}", cli.bench.prompt_tokens,
            cli.bench.generate_tokens, cli.bench.seed);
  InferBenchResult result = run_infer_bench(lm, decode_weight_bytes(model), cli.bench);
  set_copy_ceiling(result, measure_copy_bandwidth(device, cli.copy_mib << 20));

  // The header line's compute path: "+batch-invariant" with --deterministic on CUDA (cli_common.h set_deterministic).
  const std::string compute_path =
      model.compute_path() + (device.is_cuda() && cli.deterministic ? "+batch-invariant" : "");
  nlohmann::json json = infer_bench_json(result);
  json["benchmark"] = "infer";
  json["model"] = bench_model.name();
  json["device"] = device.label();
  json["compute_path"] = compute_path;
  json["precision"] = model.precision();
  json["parameters"] = model.config().total_parameters();
  json["decode_steps"] = lm.decode_path();
  json["threads"] = omp_get_max_threads();
  if (adapters > 0) json["lora_adapters"] = model.lora_adapters()->describe();
  if (device.is_cpu()) {
    json["cpu_matmul"] = cpu_matmul_name(model.cpu_matmul());
    json["cpu_kernels"] = {{"bf16", cpu_bf16_kernel()}, {"nvfp4_decode", cpu_nvfp4_dot_kernel(model.cpu_matmul())}};
  }

  std::string text =
      fmt::format("{:<28} {}\n{:<28} {} on {}, {}\n{:<28} {}\n", "model", json["model"].get<std::string>(),
                  "compute path", compute_path, device.label(), model.precision(), "decode steps", lm.decode_path());
  if (device.is_cpu())
    text += fmt::format("{:<28} {} BF16, {} NVFP4 decode, {} threads{}\n", "CPU kernels", cpu_bf16_kernel(),
                        cpu_nvfp4_dot_kernel(model.cpu_matmul()), omp_get_max_threads(), cpu_isa_limit_note());
  if (adapters > 0)
    text += fmt::format("{:<28} {} (batch 1: the first; --batch rows: row b the adapter b mod {})\n", "LoRA adapters",
                        model.lora_adapters()->describe(), adapters);
  text += infer_bench_table(result);
  if (!cli.batches.empty()) {
    // Speed-ups against batch 1 through the same step (no token choice or read-back, which the run above includes).
    std::vector<int64_t> batches = cli.batches;
    if (std::find(batches.begin(), batches.end(), 1) == batches.end()) batches.insert(batches.begin(), 1);
    std::vector<BatchedDecodeResult> batched;
    const DecodeMode batch_mode = decode_mode_for(device, cli.cuda_graph).value_or(DecodeMode::Eager);
    for (const int64_t batch : batches) {
      log::info("bench infer: batched decode, {} sequence{} of {} prompt tokens, {} steps", batch,
                batch == 1 ? "" : "s", cli.bench.prompt_tokens, cli.bench.generate_tokens - 1);
      batched.push_back(run_batched_decode_bench(model, batch, cli.bench, batch_mode, adapters));
    }
    const auto one =
        std::find_if(batched.begin(), batched.end(), [](const BatchedDecodeResult& b) { return b.batch == 1; });
    const double base = one->tokens_per_second;
    for (const BatchedDecodeResult& b : batched) json["batched_decode"].push_back(batched_decode_json(b, base));
    text += batched_decode_table(batched, base);
  }
  print_bench_result(text, json, cli.json, cli.overwrite, device);
  return 0;
}

BenchRegistration bench_infer(
    "infer", "Prefill / decode throughput, time to first token, memory and weight bandwidth of a model",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<BenchInferCliOptions>();
      add_flags(
          app,
          {
              FlagUse(rows::model(), options->model),
              FlagUse(rows::preset(), options->preset),
              FlagUse(rows::nvfp4(), options->nvfp4),
              FlagUse(rows::config(), options->config),
              FlagUse({.name = "--prompt-len",
                       .help = "prompt tokens for the prefill (default 128)",
                       .value = FlagNumber<int64_t>{{1, int64_t{1} << 24}}},
                      options->bench.prompt_tokens),
              FlagUse({.name = "--gen",
                       .help = "tokens to generate (default 64)",
                       .value = FlagNumber<int64_t>{{1, int64_t{1} << 24}}},
                      options->bench.generate_tokens),
              FlagUse(rows::seed(), options->bench.seed, "seed of the random prompt ids (default 0)"),
              FlagUse({.name = "--copy-mib",
                       .help = "size of the copy that measures the bandwidth ceiling, in MiB (default 256; keep it "
                               "well above the last-level cache)",
                       .value = FlagNumber<uint64_t>{{1, uint64_t{1} << 20}}},
                      options->copy_mib),
              FlagUse(rows::json_file(), options->json),
              FlagUse(rows::json_file_overwrite(), options->overwrite),
          });
      add_flags(app, cpu_matmul_flags(options->cpu, "int8"));
      add_flags(app, device_flags(options->device));
      add_flags(app,
                {
                    FlagUse(rows::cuda_graph(), options->cuda_graph),
                    FlagUse(rows::deterministic(), options->deterministic),
                    FlagUse({.name = "--batch",
                             .help = "also measure decode of this many sequences at once (the serve path's "
                                     "batched step), e.g. --batch 8 --batch 32: aggregate tok/s and the speed-up "
                                     "over batch 1",
                             .value = FlagNumber<int64_t>{{1, 4096}}},
                            options->batches),
                    FlagUse(rows::lora_adapter(/*several=*/true), options->lora,
                            "a PEFT LoRA adapter over the model, [NAME=]DIR, repeated for several: the batch-1 run "
                            "applies the first, --batch rows cycle through them (the cost of serve --lora)"),
                });
      return [options] { return run_bench_infer(*options); };
    });

CommandRegistration bench_registration(
    "bench", "Benchmarks: `bench infer` (prefill/decode/memory); see `bench --help`",
    [](CLI::App& app) -> CommandRun {
      app.require_subcommand(1);
      auto runs = std::make_shared<std::vector<std::pair<CLI::App*, CommandRun>>>();
      for (auto& spec : bench_registry()) {
        CLI::App* sub = app.add_subcommand(spec.name, spec.help);
        runs->emplace_back(sub, spec.setup(*sub));
      }
      return [runs] {
        for (auto& [sub, run] : *runs)
          if (sub->parsed()) return run();
        return 2;
      };
    },
    80);

}  // namespace
}  // namespace nvfp4lm::cli
