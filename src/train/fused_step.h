// One optimizer step fused into the backward (Qwen3Trainable with TrainModelOptions::fused_update): the training
// loop (trainer.cpp) and `bench train` both run it. The optimizer step is begun before the forward; the sink
// updates each parameter group as soon as the model hands it over, after summing the squares of its gradients:
//  - finite: Optimizer::update_parameters with `lr` and no clipping (the global norm is only known at the end);
//  - not finite: Optimizer::skip_parameters (the group keeps its weights and moments for this step) and the group
//    is listed in the result. The groups above it in the backward are already updated: a fused step cannot be
//    undone, which is why a trainer with --nonfinite stop stops before anything is saved.
// A non-finite loss cancels the step before any update (the model does not run the backward then).
// The returned norm is the exact global gradient norm of the step (the groups are disjoint), for logging.
#pragma once

#include <string>
#include <vector>

#include "model/qwen3_trainable.h"
#include "train/optim/optimizer.h"

namespace nvfp4lm {

struct FusedStepResult {
  LossStats stats;
  double grad_norm = 0;                     // inf/NaN when a group's gradient was not finite
  bool applied = false;                     // false: non-finite loss, nothing updated
  std::vector<std::string> skipped_groups;  // first parameter name of each group left alone
};

FusedStepResult fused_train_step(Qwen3Trainable& model, Optimizer& optimizer, const TrainBatch& batch, float grad_scale,
                                 LossKind loss, double lr);

}  // namespace nvfp4lm
