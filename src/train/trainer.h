// The training loop (`nvfp4lm train`): model + data + optimizer + LR schedule, optimizer steps, checkpoints,
// resume, metrics, export.
//
// One optimizer step:
//   1. take `grad_accum` micro-batches from the data loader (fewer for the very last step of an --epochs run) and
//      count their trained tokens N (before any forward);
//   2. zero_grad, then forward_backward every micro-batch with grad_scale = 1 / N: the gradient is that of the
//      MEAN loss over the step's trained tokens, however they are split into micro-batches;
//   3. global grad norm; a non-finite loss or norm is reported with the step and the step is skipped (no update;
//      --nonfinite skip) or the run stops (--nonfinite stop) — a non-finite value never reaches the masters or a
//      checkpoint;
//   4. optimizer step with lr = lr_at(schedule, step) and grad_multiplier = clip coefficient (--max-grad-norm);
//   5. refresh_quantized(): Q(W) for the next forward.
// Steps: --max-steps N, or every micro-batch of --epochs E epochs grouped by grad_accum; with --steps-per-epoch S,
// each epoch's micro-batches are grouped on their own (its last step may have fewer) and the epoch ends after at
// most S steps. The LR schedule spans exactly those steps.
//
// Checkpoints (train/checkpoint.h): every --save-every steps and at the end, keeping --keep. model.safetensors
// holds EVERY master weight (also frozen ones), so a checkpoint exports on its own; trainer_state.json holds
//   "config"          the run's settings (train_options.h), checked and reused by --resume
//   "epoch", "data_position"   DataLoader::state(): the next batch exactly
//   "rng", "seeds"    the loop draws from no sequential generator: the data order is a function of (seed, epoch)
//                     and stochastic rounding of (seed, step, parameter), so the seeds are the whole RNG state
//                     ("rng" stays an empty object for generators a later loop may add)
//   "model"           {"config": config.json, "generation_config": ..., "source": path}: what an export needs
//   "totals"          tokens and skipped steps so far, best loss, total steps of the schedule
//   "metrics"         the last kMetricsTail step records
// --resume continues from the newest complete checkpoint with the same batches, LR, optimizer state and masters,
// so the losses and weights are bit-identical to a run that never stopped (on the CPU).
//
// The run directory also gets metrics.jsonl (unless --metrics names another file) and source-model/ (config and
// tokenizer files of the model, for exports).
//
// Evaluation (--eval-data FILE, or --eval-split F held out of the training data by train/data/eval_split.h): the
// evaluation samples are rendered and cut exactly like the training data and batched in file order like training
// batches (same --batch, --seq-len, packing), so the evaluation loss is the training loss's quantity on other data;
// Qwen3Trainable::evaluate runs them with the weights the next step trains from (the QAT forward = the NVFP4
// export). It runs after every --eval-every steps and after the last step, as part of the step: the step's metrics
// record (metrics.jsonl) and progress line carry eval_loss / eval_perplexity / eval_token_accuracy. It reads no
// random state and changes no weight, so it leaves the run bit-identical. The lowest evaluation loss and its step
// are kept in "totals"; with --save-best a checkpoint is saved at each new lowest one and kept by pruning besides
// the --keep newest (train/checkpoint.h prune_checkpoints also_keep).
//
// Activation calibration (--calibrate-steps N): the forward passes of the last N steps record each linear's input
// amax (Qwen3Trainable::set_calibration; evaluation passes are not recorded); the ranges are saved in checkpoints
// ("calibration" in trainer_state.json, so a resumed run continues them) and written as the input_scale of the
// ModelOpt export (--export, or a later `nvfp4lm export` of a checkpoint).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "io/model_files.h"
#include "model/qwen3_trainable.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/data/data_loader.h"
#include "train/data/dataset.h"
#include "train/export.h"
#include "train/metrics.h"
#include "train/optim/lr_schedule.h"
#include "train/optim/optimizer.h"
#include "train/train_options.h"

namespace nvfp4lm {

inline constexpr size_t kMetricsTail = 20;

struct TrainSummary {
  int64_t start_step = 0;  // steps done before this process (resume)
  int64_t steps = 0;       // steps done at the end
  int64_t total_steps = 0;
  int64_t skipped_steps = 0;  // in the whole run
  int64_t loss_tokens = 0;    // trained targets processed by this process
  int64_t input_tokens = 0;   // non-padding tokens processed by this process
  double seconds = 0;         // training time of this process
  double final_loss = 0;      // the last finite step loss
  double best_loss = 0;       // lowest step loss of the whole run
  int64_t best_step = 0;
  double best_eval_loss = 0;  // lowest evaluation loss of the whole run (best_eval_step 0: none)
  int64_t best_eval_step = 0;
  std::optional<fs::path> best_checkpoint;  // --save-best
  std::vector<fs::path> checkpoints;        // on disk at the end (newest last)
  std::optional<ExportReport> export_report;
  fs::path metrics_path;
  std::optional<fs::path> memory_report_path;
  std::string memory_text;  // format_memory_report
};

// Lines for people, printed after training.
std::vector<std::string> format_train_summary(const TrainSummary& summary);

class Trainer {
 public:
  // Checks the options, loads model, tokenizer and data, builds optimizer and schedule. With options.resume,
  // restores the newest complete checkpoint of options.output after merging its saved settings with the flags in
  // `given` (keys of train_options_to_json; resolve_resume_options). Without it, a run directory that already holds
  // checkpoints is an Error (nothing is overwritten).
  Trainer(const TrainOptions& options, const std::set<std::string>& given);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  const TrainOptions& options() const { return options_; }
  Device device() const { return device_; }
  Qwen3Trainable& model() { return *model_; }
  const Qwen3Trainable& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const DatasetSummary& dataset_summary() const { return dataset_summary_; }
  // Evaluation samples (0 without evaluation data) and their scored tokens.
  int64_t eval_samples() const { return eval_samples_; }
  // The evaluation of the current weights over the evaluation data (Error without any).
  EvalMetrics evaluate();
  // Activation ranges recorded so far (--calibrate-steps).
  const ActivationCalibration& calibration() const { return calibration_; }
  const ChatTemplate& chat_template() const { return *chat_template_; }
  const LrSchedule& schedule() const { return schedule_; }
  const Optimizer& optimizer() const { return *optimizer_; }

  // "cpu/dequant-gemm" (QAT: the dequantized weights in a dense GEMM) or "cpu/dense"; "cuda/..." likewise.
  std::string compute_path() const;
  // model().describe() plus the dtype of activations.
  std::string precision() const;
  // The lines printed before training: model, QAT, data summary, parameters trained, optimizer state bytes,
  // schedule, resume point, where outputs go.
  std::vector<std::string> setup_lines() const;

  int64_t step() const { return step_; }  // optimizer steps completed
  int64_t total_steps() const { return total_steps_; }
  bool done() const { return step_ >= total_steps_; }
  // Step (checkpoint) this process resumed from, if it did.
  std::optional<int64_t> resumed_from() const { return resumed_from_; }

  // One optimizer step (see above); appended to the metrics file. Error when done(), and with --nonfinite stop on
  // a non-finite loss or gradient.
  StepMetrics train_step();
  // Writes a checkpoint of the current step and prunes to --keep; returns its directory.
  fs::path save_checkpoint();
  // Exports the current masters to options().export_path (Error when none was given).
  ExportReport export_model();

  // train_step until done, checkpoints every --save-every steps and at the end, then --export and
  // --memory-report. progress.on_step sees every step's metrics (progress display); progress.before_output is
  // called before the loop writes anything else to stderr (checkpoint and export messages), so an in-place
  // progress line can be ended first.
  struct Progress {
    std::function<void(const StepMetrics&)> on_step;
    std::function<void()> before_output;
  };
  TrainSummary run(const Progress& progress = {});

 private:
  // The update of one step (train_step's middle): forward + backward over the micro-batches, then the optimizer;
  // or both at once with --fused-update. Fill m's loss, accuracy, grad norm, clip coefficient and skip fields.
  void separate_update(StepMetrics& m, const std::vector<TokenBatch>& batches);
  void fused_update(StepMetrics& m, const TokenBatch& batch);
  // A step with a non-finite loss or gradient: an Error under --nonfinite stop, else a warning (m.skipped when
  // nothing of the step was applied).
  void report_nonfinite(StepMetrics& m, const std::string& reason, bool partly_applied);
  void resolve_resume(const std::set<std::string>& given);
  void load();
  // The evaluation batches from --eval-data, or from `held_out` (--eval-split).
  void load_eval_data(std::vector<Sample> held_out, const DatasetOptions& data_options, int32_t pad_id);
  bool evaluates_at(int64_t step) const;
  void restore_checkpoint();
  void prepare_run_directory();
  nlohmann::json trainer_state() const;
  ExportSource export_source() const;

  void set_up(const std::set<std::string>& given);
  // What the run reads (model, data, tokenizer, config), for the output guard (core/files.h).
  std::vector<GuardedInput> read_paths() const;
  // read_paths and the run's own files (its directory, which may hold outputs, checkpoints, copy of the model's
  // files), which no other output of the run may be or lie in.
  std::vector<GuardedInput> run_paths() const;
  // --metrics, or RUN_DIR/metrics.jsonl.
  fs::path metrics_path() const;
  // Whether the report `path` is the run's own: RUN_DIR/metrics.jsonl, or on --resume the file the run wrote under
  // that flag (`resumed`, as saved).
  bool is_run_report(const fs::path& path, const std::string& resumed) const;

  TrainOptions options_;
  std::unique_ptr<DirectoryLock> run_lock_;  // held for the life of the trainer
  Device device_;
  std::optional<CheckpointInfo> resume_checkpoint_;
  std::string resumed_metrics_, resumed_memory_report_;  // --metrics / --memory-report of the run resumed, as saved
  bool replace_metrics_ = false;                         // an existing metrics / memory report file may be replaced
  bool replace_memory_report_ = false;
  std::unique_ptr<ModelFiles> files_;
  std::optional<Tokenizer> tokenizer_;
  fs::path tokenizer_dir_;                     // where tokenizer_ came from (its files travel with exports)
  std::optional<ChatTemplate> chat_template_;  // resolved from --chat-template when the tokenizer loads
  nlohmann::json model_config_json_;
  std::optional<nlohmann::json> generation_config_json_;
  std::optional<Qwen3Trainable> model_;
  DatasetSummary dataset_summary_;
  std::unique_ptr<DataLoader> loader_;
  int64_t total_batches_ = 0;               // --epochs runs: micro-batches in the run (0 with --max-steps)
  std::vector<int64_t> epoch_first_steps_;  // --steps-per-epoch: the first step of each epoch (empty otherwise)
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
  int64_t total_steps_ = 0;
  int64_t step_ = 0;
  std::optional<int64_t> resumed_from_;
  std::unique_ptr<MetricsFile> metrics_file_;
  std::deque<nlohmann::json> metrics_tail_;
  int64_t skipped_steps_ = 0;
  int64_t total_loss_tokens_ = 0;  // whole run (saved in checkpoints)
  double best_loss_ = 0;
  int64_t best_step_ = 0;
  // Evaluation: batches in file order, the lowest loss and its step (0: none yet).
  std::vector<TrainBatch> eval_batches_;
  int64_t eval_samples_ = 0;
  int64_t eval_tokens_ = 0;
  double best_eval_loss_ = 0;
  int64_t best_eval_step_ = 0;
  ActivationCalibration calibration_;
  // This process.
  int64_t session_loss_tokens_ = 0;
  int64_t session_input_tokens_ = 0;
  int64_t session_steps_ = 0;
  double last_loss_ = 0;
  std::optional<std::chrono::steady_clock::time_point> session_start_;
};

}  // namespace nvfp4lm
