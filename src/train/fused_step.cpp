// See fused_step.h.
#include "train/fused_step.h"

#include <cmath>

#include "train/optim/grad_clip.h"

namespace nvfp4lm {

FusedStepResult fused_train_step(Qwen3Trainable& model, Optimizer& optimizer, const TrainBatch& batch, float grad_scale,
                                 LossKind loss, double lr) {
  NVFP4LM_ASSERT(model.options().fused_update, "fused_train_step: the model was not built with fused_update");
  FusedStepResult result;
  double sum_of_squares = 0;
  optimizer.begin_step(lr);
  const GradientSink sink = [&](std::span<Parameter> group) {
    const double squares = grad_sum_of_squares(group);
    sum_of_squares += squares;
    if (std::isfinite(squares)) {
      optimizer.update_parameters(group);
    } else {
      optimizer.skip_parameters(group);
      result.skipped_groups.push_back(group.front().name);
    }
  };
  try {
    result.stats = model.forward_backward(batch, grad_scale, loss, &sink);
  } catch (...) {
    // An error before any update (out of memory in the forward, say) leaves the optimizer usable. After some
    // groups were updated the step stays open: the run is failing and nothing of it is saved.
    if (!optimizer.step_has_updates()) optimizer.cancel_step();
    throw;
  }
  if (!std::isfinite(result.stats.loss_sum)) {
    optimizer.cancel_step();
    result.grad_norm = NAN;
    return result;
  }
  optimizer.end_step();
  result.applied = true;
  result.grad_norm = std::sqrt(sum_of_squares);
  return result;
}

}  // namespace nvfp4lm
