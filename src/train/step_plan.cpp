// See step_plan.h.
#include "train/step_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace nvfp4lm {

StepPlan plan_steps(const StepPlanSettings& settings, const std::function<int64_t(int64_t epoch)>& batches_in_epoch) {
  NVFP4LM_ASSERT(settings.grad_accum >= 1, "plan_steps: grad_accum {}", settings.grad_accum);
  StepPlan plan;
  plan.settings = settings;
  const int64_t accum = settings.grad_accum;
  if (settings.max_steps > 0) {
    plan.total_steps = settings.max_steps;
  } else if (settings.steps_per_epoch > 0) {
    for (int64_t epoch = 0; epoch < settings.epochs; ++epoch) {
      const int64_t batches = batches_in_epoch(epoch);
      const int64_t steps = std::min(settings.steps_per_epoch, (batches + accum - 1) / accum);
      plan.epoch_first_steps.push_back(plan.total_steps);
      plan.total_steps += steps;
      plan.total_batches += std::min(batches, steps * accum);
    }
  } else {
    for (int64_t epoch = 0; epoch < settings.epochs; ++epoch) plan.total_batches += batches_in_epoch(epoch);
    plan.total_steps = (plan.total_batches + accum - 1) / accum;
  }
  return plan;
}

int64_t StepPlan::micro_batches(int64_t step) const {
  if (settings.max_steps > 0 || !epoch_first_steps.empty()) return settings.grad_accum;
  return std::min(settings.grad_accum, total_batches - step * settings.grad_accum);
}

std::optional<int64_t> StepPlan::epoch_of(int64_t step) const {
  if (epoch_first_steps.empty()) return std::nullopt;
  const auto next_epoch = std::upper_bound(epoch_first_steps.begin(), epoch_first_steps.end(), step);
  return static_cast<int64_t>(next_epoch - epoch_first_steps.begin()) - 1;
}

std::string StepPlan::describe() const {
  if (settings.max_steps > 0) return fmt::format("{} steps (--max-steps)", total_steps);
  if (settings.steps_per_epoch > 0)
    return fmt::format("{} steps = {} epochs of at most {} steps (--steps-per-epoch; {} batches, grad-accum {})",
                       total_steps, settings.epochs, settings.steps_per_epoch, total_batches, settings.grad_accum);
  return fmt::format("{} steps = {} epochs x {} batches / grad-accum {}", total_steps, settings.epochs,
                     settings.epochs > 0 ? total_batches / settings.epochs : 0, settings.grad_accum);
}

}  // namespace nvfp4lm
