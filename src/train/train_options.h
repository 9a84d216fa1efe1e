// The settings of a training run (`nvfp4lm train` flags), their checks, their JSON form in trainer_state.json, and
// how a resumed run combines the saved settings with the flags given again. Each setting is one row of the flag
// table (train_flags.h: flag name, help, value, check, JSON key, resume group); the functions here walk it.
//
// JSON: one key per setting, named like its flag with '_' for '-' ("seq_len" for --seq-len; "packing" for
// --no-packing, stored positively), enum values as their flag spellings ("w4a16", "1d", "cosine", ...). Paths are
// stored absolute so a run can be resumed from another working directory.
//
// Resume (resolve_resume_options): the run continues with the SAVED settings; a flag given again must either
// equal the saved value or be one that may change:
//   - identity of the run (model or synthetic shape, max-layers, data, data rendering, batch shape, model / QAT /
//     optimizer choices, seed, loss): a different value is an Error naming the flag, both values and the fix (omit
//     the flag);
//   - schedule (lr, lr schedule, warmup, min-lr-ratio, max-grad-norm, epochs / max-steps / steps-per-epoch):
//     allowed, with a warning that the run no longer matches an uninterrupted one from here on;
//   - bookkeeping (output, save-every, keep, export, output-dat, export-format, overwrite, device, compute-dtype,
//     max-memory, metrics, memory-report, nonfinite, eval-every, save-best, calibrate-steps, reward-timeout) and memory
//     or work modes
//     (recompute, fused-update, packed-weights, step-chunk-rows): free. (--eval-data and --eval-split are the run's
//     identity: the split changes the training samples, and the best checkpoint is only comparable within one
//     evaluation set.)
// Keys added after the first layout (TrainFlag::added_later) may be missing from a saved config: they read as their
// defaults.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/device.h"
#include "core/error.h"
#include "core/files.h"
#include "data/dataset.h"
#include "io/model_files.h"
#include "model/qwen3_trainable.h"
#include "quant/nvfp4.h"
#include "tokenizer/chat.h"
#include "train/optim/lr_schedule.h"

namespace nvfp4lm {

enum class NonFinitePolicy { Skip, Stop };
// What a step optimizes: Sft, token cross-entropy on the data's completions (or --loss / --distill-from's loss); Dpo,
// a preference loss over pairs of completions (model/preference_loss.h, data/preference_data.h) against the frozen
// starting model's log-probabilities.
// Grpo: reinforcement learning with verifiable rewards over prompts (train/grpo.h), completions sampled from the
// policy.
enum class TrainObjective { Sft, Dpo, Grpo };
// --resume: Always (the flag alone) requires a checkpoint to continue; Auto continues one when --output has it and
// starts a new run otherwise (the F# predecessor's "--resume true"); Never starts a new run.
enum class ResumeMode { Never, Always, Auto };

struct TrainOptions {
  // what to train on
  std::string model;  // --model (required unless synthetic)
  // --model as the user typed it, kept in trainer_state.json beside the absolute path the run resumes from: a LoRA
  // adapter's base_model_name_or_path (PEFT writes the name the user passed to from_pretrained), from `train
  // --export` and `export RUN` alike. Empty: `model` as it is (a run being started; a run saved before this key).
  std::string model_as_typed;
  bool synthetic = false;    // --synthetic: a random in-memory model of the tiny preset's shape instead of --model
  int64_t in_features = 0;   // its hidden size (0: the preset's)
  int64_t out_features = 0;  // its intermediate size (0: the preset's)
  int max_layers = 0;        // > 0: load and train only the model's first max_layers blocks
  std::string tokenizer;     // --tokenizer (default: the model's)
  std::string data;          // --data (required unless synthetic, which defaults to the whoami data set)
  DataFormat data_format = DataFormat::Auto;
  PairTemplate data_template = PairTemplate::Chat;
  bool strict = false;
  bool train_on_everything = false;
  bool packing = true;
  std::string chat_template = "auto";  // --chat-template: auto (the tokenizer's own), a bundled name or a file
  bool train_reasoning = true;         // false: --no-train-reasoning (tokenizer/chat.h)
  // model
  QatMode qat = QatMode::W4A16;
  bool quantize_lm_head = false;
  Nvfp4Block block = Nvfp4Block::Row1x16;
  LossKind loss = LossKind::CrossEntropy;
  // --distill-from TEACHER: quantization-aware distillation (ops/distillation.h) against this frozen model's token
  // distribution on the same batches; the loss is distill_weight · τ² · KL + (1 - distill_weight) · CE.
  std::string distill_from;
  double distill_weight = 1.0;       // [0, 1]
  double distill_temperature = 1.0;  // τ > 0
  TrainObjective objective = TrainObjective::Sft;
  // --beta: DPO's β (IPO's τ), or GRPO's weight of the KL term to the reference (train/grpo_reference.h); -1: unset,
  // TRL's defaults (DPO 0.1, GRPO 0).
  double beta = -1;
  double dpo_beta() const { return beta >= 0 ? beta : 0.1; }
  double grpo_beta() const { return beta >= 0 ? beta : 0.0; }
  PreferenceLossType dpo_loss = PreferenceLossType::Sigmoid;
  // --objective grpo (train/grpo.h), TRL's GRPOConfig defaults where it has them
  std::string reward;                   // --reward (parse_reward_spec); required for grpo
  double reward_timeout = 60;           // --reward-timeout: seconds a reward command may take a step
  int64_t num_generations = 8;          // --num-generations: completions a prompt (G)
  int64_t max_completion_tokens = 256;  // --max-completion-tokens
  double temperature = 1.0;             // --temperature of the rollouts (top-k and top-p off, as TRL's)
  double epsilon = 0.2;                 // --epsilon: the clip range's low side
  double epsilon_high = 0;              // --epsilon-high: its high side (0: epsilon; DAPO recommends 0.28)
  std::optional<DType> compute_dtype;   // activations; nullopt: the device's (F32 on the CPU, BF16 on CUDA)
  int train_last_layers = -1;           // <= 0: all
  bool bf16_master = false;             // --master bf16
  Recompute recompute = Recompute::None;
  bool fused_update = false;    // --fused-update: optimizer step inside the backward (needs grad_accum 1, no clipping)
  bool packed_weights = false;  // --packed-weights: QAT forward weights stay packed NVFP4 between uses
  // --lora R: LoRA adapters (model/lora.h) over the frozen base instead of full-parameter training
  int lora_rank = 0;                 // 0: none
  double lora_alpha = 0;             // 0: the rank
  double lora_dropout = 0;           // [0, 1)
  std::string lora_targets = "all";  // --lora-targets (parse_lora_targets)
  // batches and length
  int64_t seq_len = 512;
  int64_t batch = 4;
  int64_t grad_accum = 1;
  int64_t epochs = 1;           // used when max_steps == 0
  int64_t max_steps = 0;        // > 0: this many optimizer steps (the data repeats as needed)
  int64_t steps_per_epoch = 0;  // > 0: each epoch ends after this many optimizer steps
  // optimizer and schedule
  std::string optimizer = "adamw";  // adamw | adamw8bit
  double lr = 1e-5;
  LrDecay lr_schedule = LrDecay::Cosine;
  int64_t warmup = 0;
  double min_lr_ratio = 0.0;
  double weight_decay = 0.1;
  double max_grad_norm = 1.0;   // <= 0: no clipping
  uint64_t seed = 0;            // data order and stochastic rounding
  int64_t step_chunk_rows = 0;  // > 0: the optimizer updates each parameter this many rows at a time
  // bookkeeping
  std::string output;                          // run directory (checkpoints, metrics.jsonl, source-model/)
  int64_t save_every = 0;                      // 0: only at the end
  int keep = 2;                                // checkpoints kept
  ResumeMode resume_mode = ResumeMode::Never;  // what --resume asked for
  bool resume = false;      // this run continues a checkpoint (resolve_resume_mode decides it for Auto)
  std::string export_path;  // --export OUT (empty: none)
  std::string output_dat;   // --output-dat FILE: export one .dat file, config and tokenizer beside it
  ModelFormat export_format = ModelFormat::ModeloptNvfp4;
  bool overwrite = false;  // the export, --metrics and --memory-report may replace an existing output
  std::string device = "cpu";
  double max_memory_gib = 0;  // 0: no limit
  // The predecessor's guard (core/memory_guard.h): --gpu-limit-gb (0: none), --gpu-over-secs, --gpu-poll-secs.
  double gpu_limit_gb = 0, gpu_over_secs = 0, gpu_poll_secs = 0.5;
  std::string metrics;        // default <output>/metrics.jsonl
  std::string memory_report;  // --memory-report FILE.json (empty: none)
  NonFinitePolicy nonfinite = NonFinitePolicy::Skip;
  // evaluation (trainer.h) and activation calibration
  std::string eval_data;        // --eval-data FILE (empty: none)
  double eval_split = 0;        // --eval-split F: hold out this fraction of the training samples (0: none)
  int64_t eval_every = 0;       // evaluate every N steps (0: at the end only); always at the end
  bool save_best = false;       // keep the checkpoint with the lowest evaluation loss
  int64_t calibrate_steps = 0;  // record activation ranges during the last N steps (for the ModelOpt export)

  bool has_eval() const { return !eval_data.empty() || eval_split > 0; }
};

// The run's adapters (--lora, --lora-alpha, --lora-dropout, --lora-targets, --seed) as the model takes them, and the
// lowest decoder layer that carries them (--train-last-layers N > 0: the last N of `layers`; else 0).
LoraOptions train_lora_options(const TrainOptions& options);
int64_t first_adapted_layer(const TrainOptions& options, int64_t layers);

// Checks values and combinations (the rows' checks, in table order); Error names the flag and the accepted range.
void validate_train_options(const TrainOptions& options);

// Sets `resume` from `resume_mode`: Auto resumes when options.output holds a complete checkpoint. Returns a line
// saying what Auto decided (empty for the other modes).
std::string resolve_resume_mode(TrainOptions& options);

nlohmann::json train_options_to_json(const TrainOptions& options);
// Error naming `where` and the key when a value is missing or of the wrong type.
TrainOptions train_options_from_json(const nlohmann::json& json, const std::string& where);

// Keys of train_options_to_json, and the flag each one comes from ("seq_len" -> "--seq-len").
std::string_view train_option_flag(std::string_view key);

// The settings a resumed run uses: `saved` (trainer_state.json "config") with the keys in `given` taken from
// `current` (the flags given this time), following the rules above. `where` names the checkpoint for messages.
TrainOptions resolve_resume_options(const nlohmann::json& saved, const TrainOptions& current,
                                    const std::set<std::string>& given, const std::string& where);

// Flag spellings of the enums.
std::string_view block_flag_name(Nvfp4Block block);  // "1d", "2d"
Nvfp4Block parse_block_flag(std::string_view name);
std::string_view export_format_flag_name(
    ModelFormat format);  // "modelopt", "compressed-tensors", "dat", "bf16", "gguf"
ModelFormat parse_export_format(std::string_view name);
std::string_view nonfinite_name(NonFinitePolicy policy);          // "skip", "stop"
std::string_view train_objective_name(TrainObjective objective);  // "sft", "dpo"
TrainObjective parse_train_objective(std::string_view name);
NonFinitePolicy parse_nonfinite(std::string_view name);
// --compute-dtype: "auto" (nullopt), "float32", "bfloat16", "float16"; check: what `device` can compute in.
std::string_view compute_dtype_name(const std::optional<DType>& dtype);
std::optional<DType> parse_compute_dtype(std::string_view name);
void check_compute_dtype(const std::optional<DType>& dtype, const std::string& device);

}  // namespace nvfp4lm
