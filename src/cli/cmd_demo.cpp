// `nvfp4lm demo [--work-dir DIR] [--lora R]`: what `make demo` runs — the whole pipeline on bundled data, on the CPU
// (tools/demo.h). Exit code 0 only when every answer of the reloaded NVFP4 export (with --lora: of the NVFP4 base
// with the trained adapter) is the trained one.
#include <memory>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "cli/progress_bar.h"
#include "tools/demo.h"
#include "train/metrics.h"

namespace nvfp4lm::cli {
namespace {

struct DemoCliOptions {
  std::string work_dir;
  uint64_t seed = 0;
  int64_t lora_rank = 0;
};

int run_demo_command(const DemoCliOptions& cli) {
  DemoOptions options;
  options.work_dir = cli.work_dir;
  options.seed = cli.seed;
  options.lora_rank = cli.lora_rank;
  options.out = stderr;
  options.interactive = stderr_is_terminal();
  const DemoResult result = run_demo(options);
  return result.passed() ? 0 : 1;
}

CommandRegistration demo_registration(
    "demo", "The whole pipeline on bundled data: synthesise, NVFP4-QAT train, export, reload and ask (CPU, minutes)",
    [](CLI::App& app) -> CommandRun {
      auto cli = std::make_shared<DemoCliOptions>();
      add_flags(app, {
                         FlagUse({.name = "--work-dir",
                                  .help = "where to put data, model, run and export (default: "
                                          "./demo-run/run-<date-time>)"},
                                 cli->work_dir),
                         FlagUse(rows::seed(), cli->seed, "seed of the random model and the data order (default 0)"),
                         FlagUse({.name = "--lora",
                                  .help = "the QLoRA workflow instead: quantize the random model to an NVFP4 base, "
                                          "train rank-R adapters over it (frozen), export the adapter (PEFT) and "
                                          "answer with it applied at run time (R = 16 is the one measured)",
                                  .value = FlagNumber<int64_t>{{1, 256}}},
                                 cli->lora_rank),
                     });
      return [cli] { return run_demo_command(*cli); };
    },
    95);

}  // namespace
}  // namespace nvfp4lm::cli
