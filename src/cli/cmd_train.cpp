// `nvfp4lm train --model MODEL --data FILE [...]`: full-parameter NVFP4 QAT fine-tuning (train/trainer.h).
// Parses the flags (one per row of the training flag table, train/train_flags.h) into TrainOptions, remembering
// which were given, for --resume; prints the header line and the set-up lines, shows one progress line per step
// (rewritten in place on a terminal), and ends with a summary.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/progress_bar.h"
#include "cli/train_flags_cli.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "tools/grpo_rollouts.h"
#include "train/dist/mpi_communicator.h"
#include "train/dist/watchdog.h"
#include "train/metrics.h"
#include "train/trainer.h"

namespace nvfp4lm::cli {
namespace {

struct TrainCliOptions {
  TrainOptions options;
  std::optional<TrainFlagOptions> flags;  // the flag table's rows, bound to `options`
};

// runs/train-YYYYmmdd-HHMMSS, created here (with -2, -3, ... when a run started in the same second has it).
std::string default_output() { return create_fresh_directory(fs::path("runs") / ("train-" + local_time_stamp())); }

// A default run directory that the run never wrote into (it failed first; only its lock file is there) is removed
// when the command ends, as if it had not been created. Declared before the Trainer, so the lock is released first.
struct RemoveIfStillEmpty {
  fs::path dir;
  ~RemoveIfStillEmpty() {
    if (!dir.empty()) remove_directory_if_unused(dir);
  }
};

int run_train(TrainCliOptions& cli) {
  TrainOptions& o = cli.options;
  const std::set<std::string> given = cli.flags->finish();
  if (given.count("epochs") && given.count("max_steps"))
    throw UsageError("pass either --epochs or --max-steps, not both");
  // `mpirun -np N nvfp4lm train ...` / `srun`: this process is one rank of a data-parallel run (train/dist/).
  std::unique_ptr<Communicator> ranks;
  if (launched_as_ranks()) {
    ranks = std::make_unique<WatchedCommunicator>(mpi_world(), rank_timeout_seconds());
    if (o.output.empty())
      throw UsageError(fmt::format("{} ranks share one run directory: name it with --output RUN_DIR", ranks->size()));
  }
  // The other ranks print warnings and errors only; rank 0 speaks for the run.
  const bool speaks = !ranks || ranks->rank() == 0;
  if (!speaks && log::level() < log::Level::Warn) log::set_level(log::Level::Warn);
  if (given.count("output") && o.output.empty())
    throw UsageError("--output is empty: name the run directory (or leave the flag out for runs/train-<date-time>)");
  RemoveIfStillEmpty unused_default_output;
  if (o.output.empty()) {
    if (o.resume_mode != ResumeMode::Never) throw UsageError("--resume needs --output RUN_DIR (the run to continue)");
    o.output = default_output();
    unused_default_output.dir = o.output;
  }
  const std::string resume_decision = resolve_resume_mode(o);
  if (!resume_decision.empty()) log::info("{}", resume_decision);
  if (!o.resume) {
    // Every value and combination of the flags, before anything is loaded (a resumed run's settings are only
    // known once its trainer_state.json is read: the trainer checks them then).
    try {
      validate_train_options(o);
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }

  std::optional<Trainer> trainer;
  {
    const QuietInfoLogs quiet;  // the loaders log what the header and set-up lines say; keep the header first
    trainer.emplace(o, given, ranks.get());
  }
  // --objective grpo: the batch decode engine samples the completions (tools/grpo_rollouts.h).
  if (trainer->options().objective == TrainObjective::Grpo)
    trainer->set_rollouts(batch_engine_rollouts(trainer->tokenizer(), grpo_rollout_settings(trainer->options())));
  if (speaks) {
    run_training_shown("train", *trainer);
  } else {
    trainer->run();
  }
  return 0;
}

CommandRegistration train_registration(
    "train", "Fine-tune a model with NVFP4 quantization-aware training (or plain fp32/bf16 training)",
    [](CLI::App& app) -> CommandRun {
      auto cli = std::make_shared<TrainCliOptions>();
      cli->flags.emplace(app, cli->options);
      return [cli] { return run_train(*cli); };
    },
    32);

}  // namespace
}  // namespace nvfp4lm::cli
