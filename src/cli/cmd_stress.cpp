// `nvfp4lm stress kv --model M [--full]`: the KV-cache stress matrix (tools/stress_kv.h) on the device generation
// would use, each case checked against a full forward; a table (or --json) of case, result, max |Δlogit| and time;
// exit 1 naming the failed cases. `stress` holds one subcommand today; others (a serving load, say) register below.
#include <fmt/ranges.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "core/error.h"
#include "tools/stress_kv.h"

namespace nvfp4lm::cli {
namespace {

struct StressKvCliOptions {
  ModelFlags model;
  DeviceFlags device;
  std::string cuda_graph = "on";
  bool full = false;
  int64_t max_cache = 0;
  uint64_t seed = 0;
  std::vector<std::string> tolerances;
  bool json = false;
};

int run_stress_kv_command(const StressKvCliOptions& cli) {
  StressKvOptions options;
  for (const std::string& assignment : cli.tolerances) options.tolerances.set_from_text(assignment);
  const Device device = setup_device(cli.device);
  const Qwen3Model model = load_model("stress kv", cli.model, device);
  const Tokenizer tokenizer = load_tokenizer(model);
  options.full = cli.full;
  options.max_cache = cli.max_cache;
  options.seed = cli.seed;
  options.decode = decode_mode_for(device, cli.cuda_graph);
  const StressKvReport report = run_stress_kv(model, tokenizer, options);
  const std::string out = cli.json ? stress_kv_json(report).dump(2) + "\n" : stress_kv_table(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  if (!report.pass()) {
    std::vector<std::string> failed;
    for (const StressCaseResult& c : report.cases)
      if (!c.pass() && failed.size() < 3) failed.push_back(fmt::format("'{}' ({})", c.name, c.failure));
    NVFP4LM_FAIL("stress kv: {} of {} cases failed: {}{}", report.failed(), report.cases.size(),
                 fmt::join(failed, "; "), report.failed() > 3 ? fmt::format("; and {} more", report.failed() - 3) : "");
  }
  return 0;
}

CommandRun setup_stress_kv(CLI::App& app) {
  auto options = std::make_shared<StressKvCliOptions>();
  add_flags(app, model_flags(options->model));
  add_flags(
      app,
      {
          FlagUse({.name = "--full",
                   .help = "the whole matrix (more lengths, rewinds and turns, caches up to the context limit) instead "
                           "of the short one",
                   .value = FlagSwitch{}},
                  options->full),
          FlagUse({.name = "--max-cache",
                   .help = "largest cache of the matrix, in tokens (default: the model's context limit)",
                   .value = FlagNumber<int64_t>{{0, int64_t{1} << 24}}},
                  options->max_cache),
          FlagUse(rows::seed(), options->seed, "seed of the random token ids (default 0)"),
          FlagUse(rows::tolerance(), options->tolerances),
          FlagUse(rows::json(), options->json, "print the results as JSON instead of a table"),
      });
  add_flags(app, device_flags(options->device));
  add_flags(app, {FlagUse(rows::cuda_graph(), options->cuda_graph)});
  return [options] { return run_stress_kv_command(*options); };
}

CommandRegistration stress_registration(
    "stress", "Stress checks: `stress kv` (the KV cache against full forwards); see `stress --help`",
    [](CLI::App& app) -> CommandRun {
      app.require_subcommand(1);
      CLI::App* kv = app.add_subcommand(
          "kv", "KV-cache stress matrix: prompts, generation, rewinds, chat turns, full caches vs full forwards");
      const CommandRun run_kv = setup_stress_kv(*kv);
      return [kv, run_kv] { return kv->parsed() ? run_kv() : 2; };
    },
    86);

}  // namespace
}  // namespace nvfp4lm::cli
