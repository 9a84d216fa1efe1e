// `nvfp4lm distill-cache --model STUDENT --distill-from TEACHER --data FILE --output CACHE [--top-k K]`: runs the
// teacher once over the batches a distilling run will train on and keeps its top-K log-probabilities at every
// trained token (train/distill_cache.h), so `train --distill-from CACHE` needs no teacher in memory. The data and
// run-length flags are train's rows and must be given as the run will give them (--seed, --max-steps or --epochs,
// --grad-accum, ... decide which samples the run visits; the cache is keyed by sample content, and a run that meets a
// sample it lacks is stopped at set-up, told what to do). Prints the header line, a progress bar on stderr and a
// summary with what the top K leave out.
#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "cli/progress_bar.h"
#include "cli/train_flags_cli.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/publish.h"
#include "train/distill_cache.h"
#include "train/step_plan.h"
#include "train/train_setup.h"
#include "train/train_step.h"

namespace nvfp4lm::cli {
namespace {

struct DistillCacheCliOptions {
  TrainOptions train;  // --model, --distill-from, --distill-temperature and the data flags, as train reads them
  std::string data_format = "auto";
  std::string data_template = "chat";
  DeviceFlags device;
  std::string output;
  int64_t top_k = kDefaultDistillTopK;
  bool overwrite = false;
};

// The rows of train's flag table this command registers (below).
constexpr std::array<std::string_view, 21> kTrainRows = {"model",
                                                         "distill_from",
                                                         "distill_temperature",
                                                         "data",
                                                         "eval_data",
                                                         "eval_split",
                                                         "seq_len",
                                                         "batch",
                                                         "grad_accum",
                                                         "epochs",
                                                         "max_steps",
                                                         "steps_per_epoch",
                                                         "seed",
                                                         "packing",
                                                         "tokenizer",
                                                         "data_format",
                                                         "data_template",
                                                         "chat_template",
                                                         "train_reasoning",
                                                         "train_on_everything",
                                                         "strict"};

int run_distill_cache(DistillCacheCliOptions& cli) {
  TrainOptions& o = cli.train;
  o.data_format = parse_data_format(cli.data_format);  // checked while parsing (the rows' choices)
  o.data_template = parse_pair_template(cli.data_template);
  o.device = cli.device.device;
  try {
    // The checks of train's rows this command takes, as train runs them.
    for (const TrainFlag& flag : train_flags())
      if (flag.check && std::find(kTrainRows.begin(), kTrainRows.end(), flag.key) != kTrainRows.end()) flag.check(o);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (is_distill_cache(o.distill_from))
    throw UsageError("--distill-from " + o.distill_from + " is a teacher cache already: give the teacher model");
  std::vector<GuardedInput> inputs = {{o.model, "the student (--model)"},
                                      {o.distill_from, "the teacher (--distill-from)"}};
  if (!o.data.empty()) inputs.push_back({o.data, "--data"});
  if (!o.eval_data.empty()) inputs.push_back({o.eval_data, "--eval-data"});
  if (!o.tokenizer.empty()) inputs.push_back({o.tokenizer, "--tokenizer"});
  guard_output(cli.output, "--output", inputs, cli.overwrite, OutputKind::File);
  const Device device = setup_device(cli.device);

  std::unique_ptr<ModelFiles> files;
  std::optional<TrainTokenizer> tokenizer;
  TrainData data;
  std::optional<DistillationTeacher> teacher;
  {
    const QuietInfoLogs quiet;  // the header first
    files = open_training_model(o);
    tokenizer.emplace(load_training_tokenizer(o, *files));
    data = load_training_data(o, *tokenizer, files->config());
    teacher = load_distillation_teacher(o, *files, tokenizer->tokenizer, device);
  }
  print_header("distill-cache", device, train_compute_path(device, QatMode::Off),
               device.is_cpu() ? "fp32 teacher, fp32 logits" : "bf16 teacher weights and activations, fp32 logits");

  // The batches the run will take (its steps, seed and data order: a short run over a large data set needs the
  // teacher on the samples it visits only; repeated ones are computed once), then the evaluation batches.
  const StepPlan plan = plan_training_steps(o, *data.loader, data.summary);
  std::vector<TrainBatch> batches;
  for_each_run_batch(plan, *data.loader, 0, [&](const TokenBatch& batch) {
    batches.push_back({batch.ids, batch.targets, batch.positions, batch.segment_ids, {}});
  });
  batches.insert(batches.end(), data.eval.batches.begin(), data.eval.batches.end());
  log::info(
      "teacher {} ({:.2f}M parameters, frozen); the run's {}, {} samples of {}: {} batches{}; top {} tokens at "
      "temperature {:g} -> {}",
      o.distill_from, teacher->files->config().total_parameters() / 1e6, plan.describe(), data.loader->samples().size(),
      o.data.empty() ? "whoami" : o.data, batches.size(),
      data.eval.samples > 0 ? fmt::format(" (with {} evaluation samples)", data.eval.samples) : "", cli.top_k,
      o.distill_temperature, cli.output);

  DistillCacheWriteOptions write;
  write.output = cli.output;
  write.top_k = cli.top_k;
  write.temperature = static_cast<float>(o.distill_temperature);
  write.overwrite = cli.overwrite;
  write.teacher = o.distill_from;
  write.data = o.data.empty() ? "the built-in whoami data set" : o.data;
  if (!o.eval_data.empty()) write.data += " + " + o.eval_data;
  ProgressBar bar("distill-cache", "batches", stderr_is_terminal());
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const DistillCacheStats stats =
      write_distill_cache(*teacher->model, batches, write, [&](const DistillCacheProgress& p) {
        bar.update(p.batches_done, p.batches_total, seconds(),
                   fmt::format("{}/{} positions", p.positions_done, p.positions_total));
      });
  bar.finish();
  std::printf(
      "wrote %s: %lld samples (%lld repeated ones share them), %lld trained positions, top %lld tokens each, "
      "%.1f MiB in %.1f s\n"
      "the teacher's probability outside the top %lld: %.4g on average (what the cache leaves out; --top-k keeps "
      "more)\n",
      cli.output.c_str(), static_cast<long long>(stats.samples), static_cast<long long>(stats.duplicates),
      static_cast<long long>(stats.positions), static_cast<long long>(cli.top_k),
      static_cast<double>(stats.bytes) / (1 << 20), seconds(), static_cast<long long>(cli.top_k), stats.mean_rest);
  return 0;
}

CommandRegistration distill_cache_registration(
    "distill-cache",
    "Precompute a teacher's top-K token log-probabilities over training data, for train --distill-from CACHE",
    [](CLI::App& app) -> CommandRun {
      auto cli = std::make_shared<DistillCacheCliOptions>();
      TrainOptions& o = cli->train;
      // train's rows where they mean the same, so a run's data flags can be copied here as they are; each one named
      // in kTrainRows, whose checks run.
      auto row = [](std::string_view key, auto& field, std::string help = {}) {
        NVFP4LM_ASSERT(std::find(kTrainRows.begin(), kTrainRows.end(), key) != kTrainRows.end(),
                       "distill-cache registers train's row {} without checking it (kTrainRows)", key);
        return FlagUse(train_flag_row(key), field, std::move(help));
      };
      add_flags(
          app,
          {
              row("model", o.model,
                  "the student the cache is for: its tokenizer and chat template render the data as the run "
                  "will")
                  .required(),
              row("distill_from", o.distill_from,
                  "the teacher (normally the unquantized base; the student's vocabulary and tokenizer)")
                  .required(),
              FlagUse({.name = "--output", .help = "the cache file to write (safetensors)", .value_name = "FILE"},
                      cli->output)
                  .required(),
              FlagUse({.name = "--top-k",
                       .help = fmt::format("tokens kept per position, the most likely ones (default {}, at most {})",
                                           kDefaultDistillTopK, kMaxTeacherTopK),
                       .value = FlagNumber<int64_t>{{1, kMaxTeacherTopK}}},
                      cli->top_k),
              row("distill_temperature", o.distill_temperature,
                  "temperature of the teacher's distribution (default 1); the run must use the same"),
              row("data", o.data),
              row("eval_data", o.eval_data),
              row("eval_split", o.eval_split),
              row("seq_len", o.seq_len),
              row("batch", o.batch),
              row("grad_accum", o.grad_accum),
              row("epochs", o.epochs),
              row("max_steps", o.max_steps),
              row("steps_per_epoch", o.steps_per_epoch),
              row("seed", o.seed),
              row("packing", o.packing),
              row("tokenizer", o.tokenizer),
              row("data_format", cli->data_format),
              row("data_template", cli->data_template),
              row("chat_template", o.chat_template),
              row("train_reasoning", o.train_reasoning),
              row("train_on_everything", o.train_on_everything),
              row("strict", o.strict),
              FlagUse(rows::overwrite(), cli->overwrite, "replace an existing --output"),
          });
      add_flags(app, device_flags(cli->device));
      return [cli] { return run_distill_cache(*cli); };
    },
    33);

}  // namespace
}  // namespace nvfp4lm::cli
