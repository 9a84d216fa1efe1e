// What the training loop reports about each optimizer step, and where it goes:
//  - StepMetrics: one record per step (also the JSONL line, see step_metrics_json for the keys);
//  - MetricsFile: the JSONL metrics file, one object per line, flushed after every step; a resumed run keeps the
//    lines of the steps up to its checkpoint and drops later ones (they were never checkpointed), so the file
//    always describes one consistent run;
//  - ProgressDisplay: the human view on stderr — one line per step, or a single line rewritten in place when
//    stderr is a terminal;
//  - memory_report_json: peak memory per phase (core/memory.h phases: load, forward, backward, optimizer,
//    checkpoint, export) plus the host's peak RSS, for --memory-report.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/device.h"
#include "core/files.h"

namespace nvfp4lm {

// A preference objective's figures over a step's or an evaluation's pairs, as TRL's DPOTrainer logs them (the means
// of rewards/chosen, rewards/rejected, rewards/margins, rewards/accuracies, logps/chosen, logps/rejected; reward =
// β · (log π - log π_ref) of the completion, summed over its tokens).
struct PreferenceMetrics {
  int64_t pairs = 0;
  double chosen_reward = 0, rejected_reward = 0, margin = 0, accuracy = 0;
  double chosen_logp = 0, rejected_logp = 0;
};

// --objective grpo: a step's (or an evaluation's) rollouts and where the step's time went, as TRL's GRPOTrainer names
// them where it has them (reward, reward_std, completions/mean_length, clip_ratio).
struct GrpoMetrics {
  int64_t completions = 0;
  double reward = 0, reward_std = 0;  // mean and (population) standard deviation over the completions
  double completion_length = 0;       // mean tokens a completion
  double ended = 0;                   // share of completions that ended with their end-of-sequence token
  double clip_ratio = 0;              // share of completion tokens whose clipped branch was taken
  // Mean over the completion tokens of the entropy (nats) of the distribution each was sampled from (TRL's
  // `entropy`); none when the rollouts do not measure it.
  std::optional<double> entropy;
  std::optional<double> kl;  // --beta > 0: mean over the completion tokens of the k3 estimate of KL(policy ‖ reference)
  double rollout_seconds = 0, rollout_tokens_per_second = 0, score_seconds = 0, train_seconds = 0;
  double train_tokens_per_second = 0;  // the step's prompt and completion tokens over train_seconds
};

// The evaluation of a step that evaluated (--eval-data / --eval-split; trainer.h).
struct EvalMetrics {
  double loss = 0;  // mean over the evaluation tokens
  double perplexity = 0;
  double token_accuracy = 0;
  std::optional<double> kl;         // distillation: mean KL(teacher ‖ student) per token, at the temperature
  std::optional<double> agreement;  // distillation: share of tokens where student and teacher argmax agree
  std::optional<PreferenceMetrics> preference;  // --objective dpo: loss is then the mean over the pairs
  std::optional<GrpoMetrics> grpo;  // --objective grpo: loss is then minus the mean reward (the best is the highest)
  int64_t tokens = 0;
  double seconds = 0;
  bool best = false;  // the lowest evaluation loss of the run so far
};

struct StepMetrics {
  int64_t step = 0;         // 1-based: optimizer steps completed after this one
  int64_t total_steps = 0;  // of the run
  double epoch = 0;         // epochs completed, fractional (after this step)
  double loss = 0;          // mean over the step's trained tokens (NaN when non-finite)
  double token_accuracy = 0;
  std::optional<double> kl;         // distillation (--distill-from): mean KL(teacher ‖ student) per trained token
  std::optional<double> agreement;  // distillation: share of trained tokens where student and teacher argmax agree
  std::optional<PreferenceMetrics> preference;  // --objective dpo: loss is then the mean over the step's pairs
  std::optional<GrpoMetrics> grpo;              // --objective grpo: loss is the policy-gradient loss a completion token
  int64_t loss_tokens = 0;                      // trained targets in the step (the loss normaliser)
  int64_t input_tokens = 0;                     // non-padding tokens run through the model
  int micro_batches = 0;
  double lr = 0;
  double grad_norm = 0;  // before clipping
  double clip_coefficient = 1;
  bool skipped = false;     // non-finite loss or gradient: no update was made
  std::string skip_reason;  // "non-finite loss", "non-finite gradient norm"
  double step_seconds = 0;
  double tokens_per_second = 0;  // input_tokens / step_seconds
  double elapsed_seconds = 0;    // since the start of this process's training
  double eta_seconds = 0;        // remaining steps at the average step time so far
  size_t device_bytes = 0;       // MemoryTracker current bytes on the device after the step
  size_t device_peak_bytes = 0;  // MemoryTracker peak so far
  size_t rss_bytes = 0;
  std::optional<EvalMetrics> eval;  // steps that evaluated
};

// JSON object of one step: step, total_steps, epoch, loss (null when non-finite), token_accuracy, loss_tokens,
// input_tokens, micro_batches, lr, grad_norm, clip_coefficient, skipped, skip_reason (when skipped), step_s,
// tokens_per_s, elapsed_s, eta_s, device_bytes, device_peak_bytes, rss_bytes; distilling also kl and
// teacher_agreement; with a preference objective pairs and TRL's names rewards/chosen, rewards/rejected,
// rewards/margins, rewards/accuracies, logps/chosen, logps/rejected; on steps that evaluated also eval_loss,
// eval_perplexity (not with a preference objective), eval_token_accuracy, eval_tokens, eval_s, eval_best (and eval_kl,
// eval_teacher_agreement when distilling; eval_pairs and eval_rewards/chosen, ... with a preference objective).
nlohmann::json step_metrics_json(const StepMetrics& metrics);

class MetricsFile {
 public:
  // Opens `path` for appending. keep_through_step < 0: a new file; otherwise the lines with "step" <=
  // keep_through_step of the file there are kept and the rest dropped (atomically). An existing file is replaced
  // only with `replace` (the run's own metrics, or --overwrite; core/publish.h), and only a regular file.
  MetricsFile(const fs::path& path, int64_t keep_through_step, bool replace);
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  void append(const StepMetrics& metrics);
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  std::FILE* file_ = nullptr;
};

// "0:42", "1:02:03": durations for people.
std::string format_duration(double seconds);
// "step 12/100 | epoch 0.36 | loss 2.3456 | acc 45.1% | lr 1.00e-04 | gnorm 1.23 | 1234 tok/s | 0:12 < 1:30 |
// mem 0.52 GiB", and on steps that evaluated "| eval loss 2.4567 ppl 11.67 (best)"
std::string format_step_line(const StepMetrics& metrics, Device device);

class ProgressDisplay {
 public:
  // interactive: rewrite one line in place (stderr is a terminal); otherwise one line per step.
  explicit ProgressDisplay(Device device, bool interactive, std::FILE* out = stderr);
  ~ProgressDisplay();  // ends the in-place line
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  void update(const StepMetrics& metrics);
  // Ends the in-place line (before other output).
  void finish();

 private:
  Device device_;
  bool interactive_;
  std::FILE* out_;
  bool line_open_ = false;
};

// {"device": "cpu", "phases": [{"phase": "load", "device": "cpu", "peak_bytes": N, "peak_gib": x}, ...],
//  "device_peak_bytes": N, "device_limit_bytes": N (0 = none), "host_peak_rss_bytes": N}
nlohmann::json memory_report_json(Device device);
// The trainer adds "optimizer_state_bytes" (this process's optimizer state) and, in a data-parallel run, "ranks":
// [{"rank": r, "optimizer_state_bytes": N, "device_peak_bytes": N, "host_peak_rss_bytes": N}, ...] (every rank's own).
// The same as text lines ("load 0.52 GiB, forward 1.10 GiB, ...; host peak RSS 1.3 GiB; optimizer state ...").
std::string format_memory_report(const nlohmann::json& report);

}  // namespace nvfp4lm
