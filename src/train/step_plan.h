// Which micro-batches each optimizer step of a run takes, and how many steps the run has: a pure function of the
// length settings (--max-steps, --epochs, --steps-per-epoch, --grad-accum) and the number of micro-batches in each
// epoch (DataLoader::batches_in_epoch), so the schedule, the resume check and the loop read one answer.
//   --max-steps N            N steps of grad_accum micro-batches each, the data cycling through epochs;
//   --epochs E               every micro-batch of E epochs, grouped by grad_accum (the run's last step may be short);
//   --steps-per-epoch S      each of E epochs grouped on its own (its last step may be short) and cut after S steps:
//                            a step never spans two epochs, and the loader starts each epoch where the plan says.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace nvfp4lm {

struct StepPlanSettings {
  int64_t max_steps = 0;  // > 0: the run's length in steps
  int64_t epochs = 1;
  int64_t steps_per_epoch = 0;  // > 0: the cap per epoch
  int64_t grad_accum = 1;
};

struct StepPlan {
  StepPlanSettings settings;
  int64_t total_steps = 0;
  int64_t total_batches = 0;               // micro-batches of an --epochs run (0 with --max-steps)
  std::vector<int64_t> epoch_first_steps;  // --steps-per-epoch: the first step of each epoch (empty otherwise)

  // The most micro-batches step `step` (0-based) takes: grad_accum, fewer for the last step of an --epochs run.
  // With --steps-per-epoch a step also ends with its epoch's last micro-batch.
  int64_t micro_batches(int64_t step) const;
  // --steps-per-epoch: the epoch step `step` (0-based) belongs to; nullopt otherwise (the loader just goes on).
  std::optional<int64_t> epoch_of(int64_t step) const;
  // "12 steps (--max-steps)", "12 steps = 3 epochs x 8 batches / grad-accum 2", ...
  std::string describe() const;
};

StepPlan plan_steps(const StepPlanSettings& settings, const std::function<int64_t(int64_t epoch)>& batches_in_epoch);

}  // namespace nvfp4lm
