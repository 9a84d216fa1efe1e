// `nvfp4lm bench serve (--model M | --preset P [--nvfp4]) [--requests 64] [--concurrency 16] [--prompt-len 32]
// [--gen 64] [--max-batch 16]`: the bounded loopback load test of the OpenAI server, batched vs one request at a time
// in the same run (tools/bench_serve.h). Fails when any request fails.
#include <memory>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "core/error.h"
#include "core/logging.h"
#include "tools/bench_serve.h"

namespace nvfp4lm::cli {
namespace {

struct BenchServeCliOptions {
  std::string model;
  std::string preset;
  bool nvfp4 = false;
  ModelFlags cpu;  // --cpu-matmul only
  DeviceFlags device;
  std::string cuda_graph = "on";
  ServeBenchOptions bench;
  std::string json;
  bool overwrite = false;
};

int run_bench_serve(const BenchServeCliOptions& cli) {
  check_bench_model_flags("bench serve", cli.model, cli.preset, cli.nvfp4);
  check_bench_json_path(cli.json, cli.overwrite, cli.model);
  const Device device = setup_device(cli.device);
  const BenchModel bench_model(cli.model, cli.preset, cli.nvfp4, /*with_tokenizer=*/true);
  ModelFlags flags;
  flags.model = bench_model.path();
  flags.cpu_matmul = cli.cpu.cpu_matmul;
  flags.w4a4 = cli.cpu.w4a4;
  const Qwen3Model model = load_model("bench serve", flags, device);
  if (!bench_model.note().empty()) log::info("{}", bench_model.note());
  const Tokenizer tokenizer = load_tokenizer(model);
  ServeBenchOptions options = cli.bench;
  options.decode = decode_mode_for(device, cli.cuda_graph);
  log::info(
      "bench serve: {} requests, {} clients, prompt {} tokens, {} generated each (greedy), batched with "
      "--max-batch {}, then one at a time",
      options.requests, options.concurrency, options.prompt_tokens, options.generate_tokens, options.max_batch);
  const ServeLoadResult batched = run_serve_load(model, tokenizer, options, options.max_batch);
  log::info("bench serve: batched run done in {:.1f} s", batched.wall_seconds);
  const ServeLoadResult sequential = run_serve_load(model, tokenizer, options, 1);

  nlohmann::json json = {{"benchmark", "serve"},
                         {"model", bench_model.name()},
                         {"device", device.label()},
                         {"compute_path", model.compute_path()},
                         {"precision", model.precision()},
                         {"requests", options.requests},
                         {"concurrency", options.concurrency},
                         {"prompt_tokens", options.prompt_tokens},
                         {"generate_tokens", options.generate_tokens},
                         {"batched", serve_load_json(batched)},
                         {"sequential", serve_load_json(sequential)},
                         {"decode_speedup", sequential.decode_tokens_per_second > 0
                                                ? batched.decode_tokens_per_second / sequential.decode_tokens_per_second
                                                : 0.0}};
  std::string text =
      fmt::format("{:<30} {}\n{:<30} {} on {}, {}\n{:<30} {} requests, {} clients, {} + {} tokens\n", "model",
                  bench_model.name(), "compute path", model.compute_path(), device.label(), model.precision(), "load",
                  options.requests, options.concurrency, options.prompt_tokens, options.generate_tokens);
  text += serve_bench_table(batched, sequential);
  print_bench_result(text, json, cli.json, cli.overwrite, device);
  NVFP4LM_CHECK(batched.failed == 0 && sequential.failed == 0, "bench serve: {} of {} requests failed (first: {})",
                batched.failed + sequential.failed, 2 * options.requests,
                batched.failed > 0 ? batched.first_failure : sequential.first_failure);
  return 0;
}

BenchRegistration bench_serve_registration(
    "serve", "Load test of the OpenAI server on loopback: batched vs one request at a time",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<BenchServeCliOptions>();
      add_flags(app, {
                         FlagUse(rows::model(), options->model),
                         FlagUse(rows::preset(), options->preset),
                         FlagUse(rows::nvfp4(), options->nvfp4),
                         FlagUse({.name = "--requests",
                                  .help = "requests per run (default 64)",
                                  .value = FlagNumber<int64_t>{{1, int64_t{1} << 20}}},
                                 options->bench.requests),
                         FlagUse({.name = "--concurrency",
                                  .help = "client threads (default 16)",
                                  .value = FlagNumber<int64_t>{{1, 1024}}},
                                 options->bench.concurrency),
                         FlagUse({.name = "--prompt-len",
                                  .help = "prompt tokens per request (default 32)",
                                  .value = FlagNumber<int64_t>{{1, int64_t{1} << 20}}},
                                 options->bench.prompt_tokens),
                         FlagUse({.name = "--gen",
                                  .help = "tokens generated per request (default 64)",
                                  .value = FlagNumber<int64_t>{{1, int64_t{1} << 20}}},
                                 options->bench.generate_tokens),
                         FlagUse(rows::max_batch(), options->bench.max_batch, "slots of the batched run (default 16)"),
                         FlagUse(rows::seed(), options->bench.seed, "seed of the random prompt ids (default 0)"),
                         FlagUse(rows::json_file(), options->json),
                         FlagUse(rows::json_file_overwrite(), options->overwrite),
                     });
      add_flags(app, cpu_matmul_flags(options->cpu, "int8"));
      add_flags(app, device_flags(options->device));
      add_flags(app, {FlagUse(rows::cuda_graph(), options->cuda_graph)});
      return [options] { return run_bench_serve(*options); };
    });

}  // namespace
}  // namespace nvfp4lm::cli
