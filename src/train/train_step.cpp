// See train_step.h.
#include "train/train_step.h"

#include <fmt/format.h>

#include <cmath>

#include "core/memory.h"
#include "ops/nvfp4_w4a4_linear.h"
#include "train/optim/grad_clip.h"

namespace nvfp4lm {

LossStats accumulate_gradients(Qwen3Trainable& model, std::span<const TrainBatch> micro_batches, float grad_scale,
                               const TrainLoss& loss) {
  const MemoryPhase phase("forward");
  LossStats total;
  for (const TrainBatch& batch : micro_batches) total += model.forward_backward(batch, grad_scale, loss);
  return total;
}

namespace {

// The update given the step's gradient norm: `update` (the parameters whose gradients are the step's sum) by the
// optimizer, the masters shared across ranks (data parallel), the forward weights refreshed.
UpdateResult apply_update_with_norm(Qwen3Trainable& model, Optimizer& optimizer, std::span<Parameter> update,
                                    double norm, double loss, double lr, double max_grad_norm,
                                    DataParallel* data_parallel, const std::function<void(StepPart)>& after) {
  UpdateResult result;
  result.grad_norm = norm;
  UpdatedMasterAmaxes updated;  // the masters' amaxes, measured by the update for the refresh right after it
  {
    const MemoryPhase phase("optimizer");
    if (!std::isfinite(loss) || !std::isfinite(result.grad_norm)) return result;
    result.clip_coefficient = clip_coefficient(result.grad_norm, max_grad_norm);
    optimizer.step(update, lr, static_cast<float>(result.clip_coefficient), &updated);
    if (data_parallel != nullptr) data_parallel->share_masters();
    if (after) after(StepPart::Optimizer);
  }
  const MemoryPhase phase("refresh");
  model.refresh_quantized(&updated);  // the masters another rank updated are measured here
  if (after) after(StepPart::Refresh);
  result.applied = true;
  result.update_amaxes = updated.recorded();
  return result;
}

}  // namespace

UpdateResult apply_update(Qwen3Trainable& model, Optimizer& optimizer, double loss, double lr, double max_grad_norm,
                          const std::function<void(StepPart)>& after) {
  double norm = 0;
  {
    const MemoryPhase phase("optimizer");
    norm = grad_norm(model.parameters());
  }
  return apply_update_with_norm(model, optimizer, model.parameters(), norm, loss, lr, max_grad_norm, nullptr, after);
}

FusedStepResult fused_train_step(Qwen3Trainable& model, Optimizer& optimizer, const TrainBatch& batch, float grad_scale,
                                 const TrainLoss& loss, double lr) {
  NVFP4LM_ASSERT(model.options().fused_update, "fused_train_step: the model was not built with fused_update");
  FusedStepResult result;
  double sum_of_squares = 0;
  optimizer.begin_step(lr);
  const GradientSink sink = [&](std::span<Parameter> group, UpdatedMasterAmaxes& updated) {
    const double squares = grad_sum_of_squares(group);
    sum_of_squares += squares;
    if (std::isfinite(squares)) {
      optimizer.update_parameters(group, &updated);
      result.update_amaxes += updated.recorded();
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

StepResult take_train_step(Qwen3Trainable& model, Optimizer& optimizer, std::span<const TrainBatch> micro_batches,
                           const StepSettings& settings, const std::function<void(StepPart)>& after,
                           DataParallel* data_parallel) {
  StepResult result;
  if (model.options().fused_update) {
    NVFP4LM_ASSERT(data_parallel == nullptr, "a fused step is not data parallel (train refuses the combination)");
    NVFP4LM_ASSERT(micro_batches.size() == 1, "a fused step takes one micro-batch, not {}", micro_batches.size());
    const MemoryPhase phase("forward");  // the whole step runs inside the model's forward and backward
    FusedStepResult fused =
        fused_train_step(model, optimizer, micro_batches.front(), settings.grad_scale, settings.loss, settings.lr);
    if (after) after(StepPart::Backward);
    result.stats = fused.stats;
    result.grad_norm = fused.grad_norm;
    result.applied = fused.applied;
    result.skipped_groups = std::move(fused.skipped_groups);
    result.update_amaxes = fused.update_amaxes;
  } else {
    UpdateResult update;
    if (data_parallel != nullptr) {
      DataParallel::StepOutcome outcome;
      {
        const MemoryPhase phase("forward");
        outcome = data_parallel->accumulate(model, micro_batches, settings.grad_scale, settings.loss);
      }
      result.stats = outcome.stats;
      if (after) after(StepPart::Backward);
      update = apply_update_with_norm(model, optimizer, outcome.update, outcome.grad_norm, result.stats.mean(),
                                      settings.lr, settings.max_grad_norm, data_parallel, after);
    } else {
      result.stats = accumulate_gradients(model, micro_batches, settings.grad_scale, settings.loss);
      if (after) after(StepPart::Backward);
      update = apply_update(model, optimizer, result.stats.mean(), settings.lr, settings.max_grad_norm, after);
    }
    result.grad_norm = update.grad_norm;
    result.clip_coefficient = update.clip_coefficient;
    result.applied = update.applied;
    result.update_amaxes = update.update_amaxes;
  }
  // Fused: delivered groups are zeroed by the model, but a non-finite loss returns before any delivery with the
  // loss head's gradients (lm_head, a tied embedding) already accumulated. Unfused: nothing was applied.
  if (!result.applied) model.zero_grad();
  return result;
}

std::string train_compute_path(Device device, QatMode qat) {
  // W4A4 on Blackwell SM 12.x: the layers' linears on the FP4 tensor cores (Qwen3Trainable::native_w4a4 decides the
  // same way), the backward's GEMMs and the lm_head as dequant-gemm.
  if (qat == QatMode::W4A4 && device.is_cuda() && nvfp4_w4a4_native(device))
    return std::string(nvfp4_w4a4_compute_path(device)) + " + cuda/dequant-gemm";
  return fmt::format("{}/{}", device.is_cpu() ? "cpu" : "cuda", qat == QatMode::Off ? "dense" : "dequant-gemm");
}

std::string train_precision(Device device, bool bf16_master) {
  return fmt::format("{} activations{}, {} master weights, fp32 gradients", device.is_cpu() ? "fp32" : "bf16",
                     device.is_cpu() ? "" : " (fp32 accumulation)",
                     bf16_master ? "bf16 (stochastic rounding)" : "fp32");
}

}  // namespace nvfp4lm
