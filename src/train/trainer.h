// The training loop (`nvfp4lm train`): model + data + optimizer + LR schedule, optimizer steps, checkpoints,
// resume, metrics, export. The loop is trainer.cpp; its rooms are train_setup.h (loading and building what the run
// trains), run_directory.h (lock, output guards, resume point, checkpoints, metrics file), step_plan.h (which
// micro-batches each step takes), train_step.h (one step, fused or not, as `bench train` takes it too),
// run_totals.h (what the run counts across processes) and train_report.cpp (the lines printed before and after).
//
// One optimizer step:
//   1. take `grad_accum` micro-batches from the data loader (fewer for the very last step of an --epochs run) and
//      count their trained tokens N (before any forward);
//   2. zero_grad, then forward_backward every micro-batch with grad_scale = 1 / N: the gradient is that of the
//      MEAN loss over the step's trained tokens, however they are split into micro-batches. On the CPU (unfused)
//      each micro-batch's gradient is computed from zero and added to an accumulator in micro-batch order
//      (train/dist/data_parallel.h), the order N data-parallel ranks reproduce bit for bit; on CUDA the backward
//      adds into the gradients;
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
// Evaluation (--eval-data FILE, or --eval-split F held out of the training data by data/eval_split.h): the
// evaluation samples are rendered and cut exactly like the training data and batched in file order like training
// batches (same --batch, --seq-len, packing), so the evaluation loss is the training loss's quantity on other data;
// Qwen3Trainable::evaluate runs them with the weights the next step trains from (the QAT forward = the NVFP4
// export). It runs after every --eval-every steps and after the last step, as part of the step: the step's metrics
// record (metrics.jsonl) and progress line carry eval_loss / eval_perplexity / eval_token_accuracy. It reads no
// random state and changes no weight, so it leaves the run bit-identical. The lowest evaluation loss and its step
// are kept in "totals"; with --save-best a checkpoint is saved at each new lowest one and kept by pruning besides
// the --keep newest (train/checkpoint.h prune_checkpoints also_keep). Data parallel, batch i is rank i mod N's and
// the statistics are added in batch order (DataParallel::sum_dealt): one process's figures, bit for bit.
//
// Activation calibration (--calibrate-steps N): the forward passes of the last N steps record each linear's input
// amax (Qwen3Trainable::set_calibration; evaluation passes are not recorded); the ranges are saved in checkpoints
// ("calibration" in trainer_state.json, so a resumed run continues them) and written as the input_scale of the
// ModelOpt export (--export, or a later `nvfp4lm export` of a checkpoint). Each step records into its own set, merged
// into the run's after the step (add_step_calibration): across data-parallel ranks the max of their amaxes and the
// sum of their tokens, exact in any order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/stopwatch.h"
#include "io/model_files.h"
#include "model/qwen3_trainable.h"
#include "tokenizer/tokenizer.h"
#include "train/dist/communicator.h"
#include "train/dist/data_parallel.h"
#include "train/export.h"
#include "train/grpo.h"
#include "train/metrics.h"
#include "train/optim/lr_schedule.h"
#include "train/optim/optimizer.h"
#include "train/run_directory.h"
#include "train/run_totals.h"
#include "train/step_plan.h"
#include "train/train_options.h"
#include "train/train_setup.h"

namespace nvfp4lm {

class MemoryGuard;

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
  bool objective_loss = false;  // --objective dpo / grpo: the losses are not token cross-entropies (no perplexity)
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
  // `ranks`: the data-parallel group this process is one rank of (`mpirun -np N nvfp4lm train`, train/dist/); none:
  // one process. Every rank constructs its Trainer with the same options and calls the same methods in the same
  // order (the steps, checkpoints and evaluations hold collectives). Rank 0 owns the run directory and writes every
  // output (checkpoints, metrics, exports, reports); the other ranks write nothing. N ranks train unfused, with
  // --grad-accum a multiple of N, and end every step with the weights one process would have: on the CPU bit for
  // bit; on GPUs (one a rank: its local rank's, rank_device) to the rounding of the transport's sums.
  Trainer(const TrainOptions& options, const std::set<std::string>& given, Communicator* ranks = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  const TrainOptions& options() const { return options_; }
  Device device() const { return device_; }
  Qwen3Trainable& model() { return *model_; }
  const Qwen3Trainable& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return tokenizer_->tokenizer; }
  const DatasetSummary& dataset_summary() const { return data_.summary; }
  // Evaluation samples (0 without evaluation data) and their scored tokens.
  int64_t eval_samples() const { return data_.eval.samples; }
  // The evaluation of the current weights over the evaluation data (Error without any). --objective grpo: the
  // evaluation prompts' completions (--num-generations each, drawn with the same seeds at every evaluation) scored.
  EvalMetrics evaluate();
  // --objective grpo: what samples the completions (tools/grpo_rollouts.h; the train command sets it).
  void set_rollouts(RolloutFn rollouts) { rollouts_ = std::move(rollouts); }
  // Activation ranges recorded so far (--calibrate-steps).
  const ActivationCalibration& calibration() const { return calibration_; }
  const ChatTemplate& chat_template() const { return tokenizer_->chat_template; }
  const LrSchedule& schedule() const { return schedule_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  // The data-parallel group (one process: a group of one).
  Communicator& ranks() const { return *comm_; }
  // Rank 0: the process that writes the run's outputs.
  bool writes_outputs() const { return comm_->rank() == 0; }

  // "cpu/dequant-gemm" (QAT: the dequantized weights in a dense GEMM) or "cpu/dense"; "cuda/..." likewise.
  std::string compute_path() const;
  // model().describe() plus the dtype of activations.
  std::string precision() const;
  // The lines printed before training: model, QAT, data summary, parameters trained, optimizer state bytes,
  // schedule, resume point, where outputs go.
  std::vector<std::string> setup_lines() const;

  int64_t step() const { return step_; }  // optimizer steps completed
  int64_t total_steps() const { return plan_.total_steps; }
  bool done() const { return step_ >= plan_.total_steps; }
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
  void set_up(const std::set<std::string>& given);
  void load();
  void restore_checkpoint();
  // A step with a non-finite loss or gradient: an Error under --nonfinite stop, else a warning (m.skipped when
  // nothing of the step was applied).
  void apply_nonfinite_policy(StepMetrics& m, const std::string& reason, bool partly_applied) const;
  // --device as this rank opens it: several ranks on `cuda` take one GPU each (their local rank's).
  std::string rank_device() const;
  // N ranks: what data-parallel training needs of the options, and that every rank set up the same run.
  void check_data_parallel() const;
  void check_ranks_agree() const;
  // A step's activation ranges (--calibrate-steps) into the run's, merged across the ranks (a collective).
  void add_step_calibration(const ActivationCalibration& step);
  bool evaluates_at(int64_t step) const;
  // --objective grpo: the step's prompts' completions sampled, scored and made the step's micro-batches (one per
  // batch of prompts); fills the step's token counts and m.grpo.
  std::vector<TrainBatch> grpo_micro_batches(const std::vector<TokenBatch>& batches, StepMetrics& m);
  // Samples G completions of each prompt (prompt-major) and scores them; the completions' tokens and rewards.
  struct Scored {
    std::vector<Completion> completions;
    std::vector<double> rewards;
    double rollout_seconds = 0, score_seconds = 0;
  };
  Scored sample_and_score(const std::vector<const Sample*>& prompts, const std::vector<const nlohmann::json*>& records,
                          int64_t seed_step);
  nlohmann::json trainer_state() const;
  // N ranks: every rank's optimizer state and peak memory (metrics.h memory_report_json's "ranks"; a collective).
  nlohmann::json ranks_memory() const;
  ExportSource export_source() const;
  // What the run reads (model, data, tokenizer, config), for the output guards (core/files.h).
  std::vector<GuardedInput> read_paths() const;

  TrainOptions options_;
  std::unique_ptr<Communicator> single_process_;  // when no group was given
  Communicator* comm_ = nullptr;
  std::unique_ptr<RunDirectory> run_dir_;  // rank 0's, locked for the life of the trainer (other ranks: none)
  Device device_;
  std::unique_ptr<MemoryGuard> memory_guard_;  // --gpu-limit-gb (core/memory_guard.h), for the life of the trainer
  std::optional<ResumePoint> resume_;
  std::unique_ptr<ModelFiles> files_;
  std::optional<TrainTokenizer> tokenizer_;
  SourceModelFiles source_;
  std::optional<Qwen3Trainable> model_;
  std::optional<DistillationTeacher> teacher_;  // --distill-from
  TrainData data_;
  StepPlan plan_;
  // CPU, unfused: the step's sums in a fixed order, the optimizer over this rank's shard (train/dist/data_parallel.h);
  // several GPU ranks: the same with the gradients and masters moved by device_collectives_.
  std::unique_ptr<DeviceCollectives> device_collectives_;
  std::unique_ptr<DataParallel> data_parallel_;
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
  int64_t step_ = 0;
  std::optional<int64_t> resumed_from_;
  RunTotals totals_;
  ActivationCalibration calibration_;
  double reference_seconds_ = 0;              // --objective dpo: computing the reference log-probabilities
  std::optional<Qwen3Model> grpo_reference_;  // --objective grpo --beta > 0 (train/grpo_reference.h)
  RolloutFn rollouts_;                        // --objective grpo
  // This process.
  struct Session {
    int64_t loss_tokens = 0;
    int64_t input_tokens = 0;
    int64_t steps = 0;
    std::optional<Clock::time_point> start;
  } session_;
};

}  // namespace nvfp4lm
