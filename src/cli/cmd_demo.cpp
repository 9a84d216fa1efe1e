// `nvfp4lm demo [--work-dir DIR] [--lora R | --grpo]`: what `make demo` runs — the whole pipeline on bundled data, on
// the CPU (tools/demo.h). Exit code 0 only when every answer of the reloaded NVFP4 export (with --lora: of the NVFP4
// base with the trained adapter) is the trained one; with --grpo (tools/demo_grpo.h), only when the held-out reward
// rose from under 0.2 to over 0.9.
#include <memory>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "cli/progress_bar.h"
#include "tools/demo.h"
#include "tools/demo_grpo.h"
#include "train/metrics.h"

namespace nvfp4lm::cli {
namespace {

struct DemoCliOptions {
  std::string work_dir;
  uint64_t seed = 0;
  int64_t lora_rank = 0;
  bool grpo = false;
};

int run_demo_command(const DemoCliOptions& cli) {
  if (cli.grpo) {
    NVFP4LM_CHECK(cli.lora_rank == 0, "demo: --grpo and --lora are two demos; choose one");
    GrpoDemoOptions options;
    options.work_dir = cli.work_dir;
    options.seed = cli.seed;
    options.out = stderr;
    options.interactive = stderr_is_terminal();
    return run_grpo_demo(options).passed() ? 0 : 1;
  }
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
      add_flags(app,
                {
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
                    FlagUse({.name = "--grpo",
                             .help = "reinforcement learning instead: GRPO teaches the random model a verifiable "
                                     "rule (answers begin with a capital letter), completions sampled from its own "
                                     "NVFP4 weights; held-out reward before and after (about a minute)",
                             .value = FlagSwitch{}},
                            cli->grpo),
                });
      return [cli] { return run_demo_command(*cli); };
    },
    95);

}  // namespace
}  // namespace nvfp4lm::cli
