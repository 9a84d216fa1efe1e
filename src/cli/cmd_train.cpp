// `nvfp4lm train --model MODEL --data FILE [...]`: full-parameter NVFP4 QAT fine-tuning (train/trainer.h).
// Parses the flags into TrainOptions (remembering which were given, for --resume), prints the header line and the
// set-up lines, shows one progress line per step (rewritten in place on a terminal), and ends with a summary.
#include <ctime>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/logging.h"
#include "tokenizer/chat_template_choice.h"
#include "train/metrics.h"
#include "train/trainer.h"

namespace nvfp4lm::cli {
namespace {

// Flag values kept as text until after parsing, so bad values get nvfp4lm's one-line errors.
struct TrainCliOptions {
  TrainOptions options;
  std::string qat = "w4a16", block = "1d", loss = "ce", lr_schedule = "cosine", master = "fp32", recompute = "none";
  std::string export_format = "modelopt", nonfinite = "skip", data_format = "auto", data_template = "chat";
  std::string chat_template = "auto";
  bool no_packing = false;
  std::vector<std::pair<std::string, CLI::Option*>> flags;  // option key -> its flag
};

std::string default_output() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return std::string("runs/train-") + stamp;
}

int run_train(TrainCliOptions& cli) {
  TrainOptions& o = cli.options;
  o.qat = parse_flag_value("--qat", cli.qat, parse_qat_mode);
  o.block = parse_flag_value("--block", cli.block, parse_block_flag);
  o.loss = parse_flag_value("--loss", cli.loss, parse_loss_kind);
  o.lr_schedule = parse_flag_value("--lr-schedule", cli.lr_schedule, parse_lr_decay);
  NVFP4LM_CHECK(cli.master == "fp32" || cli.master == "bf16", "unknown --master '{}' (choose fp32 or bf16)",
                cli.master);
  o.bf16_master = cli.master == "bf16";
  o.recompute = parse_flag_value("--recompute", cli.recompute, parse_recompute);
  o.export_format = parse_flag_value("--export-format", cli.export_format, parse_export_format);
  o.nonfinite = parse_flag_value("--nonfinite", cli.nonfinite, parse_nonfinite);
  o.data_format = parse_flag_value("--data-format", cli.data_format, parse_data_format);
  o.data_template = parse_flag_value("--data-template", cli.data_template, parse_pair_template);
  o.chat_template = parse_flag_value("--chat-template", cli.chat_template, parse_chat_template_flag);
  o.packing = !cli.no_packing;

  std::set<std::string> given;
  for (const auto& [key, option] : cli.flags)
    if (option->count() > 0) given.insert(key);
  NVFP4LM_CHECK(!(given.count("epochs") && given.count("max_steps")), "pass either --epochs or --max-steps, not both");
  if (o.output.empty()) {
    NVFP4LM_CHECK(!o.resume, "--resume needs --output RUN_DIR (the run to continue)");
    o.output = default_output();
  }
  if (!o.resume) {
    NVFP4LM_CHECK(!o.model.empty(), "--model is required (the model to fine-tune)");
    NVFP4LM_CHECK(!o.data.empty(), "--data is required (the training data file)");
  }

  std::optional<Trainer> trainer;
  {
    const QuietInfoLogs quiet;  // the loaders log what the header and set-up lines say; keep the header first
    trainer.emplace(o, given);
  }
  print_header("train", trainer->device(), trainer->compute_path(), trainer->precision());
  for (const std::string& line : trainer->setup_lines()) log::info("{}", line);

  ProgressDisplay display(trainer->device(), ProgressDisplay::stderr_is_terminal());
  Trainer::Progress progress;
  progress.on_step = [&](const StepMetrics& metrics) { display.update(metrics); };
  progress.before_output = [&] { display.finish(); };
  const TrainSummary summary = trainer->run(progress);
  display.finish();
  for (const std::string& line : format_train_summary(summary)) log::info("{}", line);
  return 0;
}

CommandRegistration registration(
    "train", "Fine-tune a model with NVFP4 quantization-aware training (or plain fp32/bf16 training)",
    [](CLI::App& app) -> CommandRun {
      auto cli = std::make_shared<TrainCliOptions>();
      TrainOptions& o = cli->options;
      auto flag = [&](const std::string& key, CLI::Option* option) {
        cli->flags.emplace_back(key, option);
        return option;
      };
      flag("model", app.add_option("--model", o.model, "model to fine-tune: HF directory, ModelOpt NVFP4 or .dat"));
      flag("tokenizer", app.add_option("--tokenizer", o.tokenizer, "tokenizer directory (default: the model's)"));
      flag("data",
           app.add_option("--data", o.data, "training data: .jsonl (messages or prompt/completion), .tsv, .txt"));
      flag("output", app.add_option("--output", o.output,
                                    "run directory for checkpoints and metrics (default runs/train-<date-time>)"));
      flag("qat", app.add_option("--qat", cli->qat, "w4a16 (default), w4a4 or off (plain training)"));
      flag("quantize_lm_head", app.add_flag("--quantize-lm-head", o.quantize_lm_head, "quantize lm_head too"));
      flag("block", app.add_option("--block", cli->block, "NVFP4 scale blocks: 1d (1x16, default) or 2d (16x16)"));
      flag("loss", app.add_option("--loss", cli->loss, "ce (token cross-entropy, default) or l1 (debug)"));
      flag("seq_len", app.add_option("--seq-len", o.seq_len, "tokens per row (default 512)"));
      flag("batch", app.add_option("--batch", o.batch, "rows per micro-batch (default 4)"));
      flag("grad_accum", app.add_option("--grad-accum", o.grad_accum, "micro-batches per optimizer step (default 1)"));
      flag("epochs", app.add_option("--epochs", o.epochs, "passes over the data (default 1)"));
      flag("max_steps", app.add_option("--max-steps", o.max_steps, "optimizer steps instead of --epochs"));
      flag("lr", app.add_option("--lr", o.lr, "peak learning rate (default 1e-5)"));
      flag("lr_schedule", app.add_option("--lr-schedule", cli->lr_schedule, "constant, linear or cosine (default)"));
      flag("warmup", app.add_option("--warmup", o.warmup, "linear warmup steps (default 0)"));
      flag("min_lr_ratio", app.add_option("--min-lr-ratio", o.min_lr_ratio, "final lr / peak lr (default 0)"));
      flag("weight_decay", app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay (default 0.1)"));
      flag("max_grad_norm",
           app.add_option("--max-grad-norm", o.max_grad_norm, "clip the global grad norm; <= 0 = off (default 1)"));
      flag("optimizer", app.add_option("--optimizer", o.optimizer, "adamw (default) or adamw8bit"));
      flag("master", app.add_option("--master", cli->master, "master weights: fp32 (default) or bf16"));
      flag("recompute", app.add_option("--recompute", cli->recompute,
                                       "none (default) or block: keep only each block's input and re-run its forward "
                                       "in the backward (less memory, one more forward)"));
      flag("fused_update",
           app.add_flag("--fused-update", o.fused_update,
                        "apply each layer's optimizer update inside the backward, keeping one layer's gradients "
                        "(needs --grad-accum 1 and --max-grad-norm 0)"));
      flag("packed_weights", app.add_flag("--packed-weights", o.packed_weights,
                                          "QAT: keep the forward's NVFP4 weights packed and dequantize one block at a "
                                          "time (same results, ~3.5x less memory for them)"));
      flag("train_last_layers",
           app.add_option("--train-last-layers", o.train_last_layers, "train only the last N layers (default: all)"));
      flag("save_every",
           app.add_option("--save-every", o.save_every, "checkpoint every N steps (default: at the end)"));
      flag("keep", app.add_option("--keep", o.keep, "checkpoints to keep (default 2)"));
      app.add_flag("--resume", o.resume, "continue the run in --output from its newest complete checkpoint");
      flag("export", app.add_option("--export", o.export_path, "export the trained model here at the end"));
      flag("export_format",
           app.add_option("--export-format", cli->export_format, "modelopt (NVFP4, default), dat (NVFP4) or bf16"));
      flag("overwrite", app.add_flag("--overwrite", o.overwrite, "let --export replace an existing directory"));
      flag("seed", app.add_option("--seed", o.seed, "data order and stochastic rounding seed (default 0)"));
      flag("device", app.add_option("--device", o.device, "cpu (default), cuda or cuda:N"));
      flag("max_memory", app.add_option("--max-memory", o.max_memory_gib,
                                        "fail instead of allocating more than this many GiB on the device"));
      flag("metrics", app.add_option("--metrics", o.metrics, "JSONL metrics file (default RUN_DIR/metrics.jsonl)"));
      flag("memory_report",
           app.add_option("--memory-report", o.memory_report, "write peak memory per phase to this JSON file"));
      flag("nonfinite", app.add_option("--nonfinite", cli->nonfinite,
                                       "on a NaN/inf loss or gradient: skip the step (default) or stop"));
      flag("data_format", app.add_option("--data-format", cli->data_format, "auto (by extension), jsonl, tsv, text"));
      flag("data_template",
           app.add_option("--data-template", cli->data_template, "prompt/target pairs: chat (default) or raw"));
      flag("strict", app.add_flag("--strict", o.strict, "truncated or untrainable samples are errors"));
      flag("train_on_everything",
           app.add_flag("--train-on-everything", o.train_on_everything, "loss on every token, prompts included"));
      flag("packing", app.add_flag("--no-packing", cli->no_packing, "one sample per row instead of packing"));
      flag("chat_template", app.add_option("--chat-template", cli->chat_template,
                                           "auto (the tokenizer's own, default), instruct-2507 or hybrid-thinking"));
      return [cli] { return run_train(*cli); };
    },
    32);

}  // namespace
}  // namespace nvfp4lm::cli
