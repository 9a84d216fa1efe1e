// What a training run counts across all its processes, saved in each checkpoint's trainer_state.json ("totals" and
// "metrics") so a resumed run goes on counting: trained tokens, skipped steps, the lowest step loss and the lowest
// evaluation loss with their steps, the last finite loss, and the last kMetricsTail step records.
#pragma once

#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>

#include "train/metrics.h"

namespace nvfp4lm {

inline constexpr size_t kMetricsTail = 20;

struct RunTotals {
  int64_t loss_tokens = 0;
  int64_t skipped_steps = 0;
  double best_loss = 0;  // best_step 0: none yet
  int64_t best_step = 0;
  double best_eval_loss = 0;  // best_eval_step 0: none yet
  int64_t best_eval_step = 0;
  double last_loss = 0;  // the last finite step loss
  std::deque<nlohmann::json> metrics_tail;

  // Counts a finished step; sets m.eval->best when its evaluation loss is the lowest so far.
  void record(StepMetrics& m);
  // "totals" (with the run's total_steps) and "metrics" of trainer_state.json.
  nlohmann::json totals_json(int64_t total_steps) const;
  nlohmann::json metrics_json() const;
  // From a checkpoint's trainer_state.json (`where` names it in errors); absent keys read as zero.
  static RunTotals from_state(const nlohmann::json& state, const std::string& where);
};

}  // namespace nvfp4lm
