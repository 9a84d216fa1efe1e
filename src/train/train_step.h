// One training step, the way the training loop (trainer.cpp) and `bench train` (tools/bench_train.cpp) both take it,
// so the benchmark times exactly the step users train with (as llm.c's main, tests and profiler all call
// gpt2_update): take_train_step. Two forms behind it, chosen by TrainModelOptions::fused_update:
//
// Unfused (accumulate_gradients, then apply_update): the micro-batches' gradients are summed (grad_scale =
// 1 / trained tokens of the whole step), then the global gradient norm is taken; a non-finite loss or norm applies
// nothing (the caller decides between skipping and stopping, and zeroes the gradients); otherwise the optimizer
// updates every parameter with the clip coefficient as its gradient multiplier, and the QAT forward weights are
// refreshed from the new masters (Q(W) once per step), with the masters' amaxes that the update measured while it
// wrote them (quant/master_amax.h UpdatedMasterAmaxes: one pass over each master fewer, the same bits). Memory phases:
// "forward"/"backward" (the model's own), "optimizer", "refresh". `after` (optional) is called when the optimizer
// update and when the refresh are done: the benchmark synchronises the device and reads its clock there.
//
// Fused (fused_train_step): the optimizer step fused into the backward. The optimizer step is begun before the
// forward; the sink
// updates each parameter group as soon as the model hands it over, after summing the squares of its gradients:
//  - finite: Optimizer::update_parameters with `lr` and no clipping (the global norm is only known at the end),
//    measuring the group's master amaxes for the group's refresh;
//  - not finite: Optimizer::skip_parameters (the group keeps its weights and moments for this step) and the group
//    is listed in the result. The groups above it in the backward are already updated: a fused step cannot be
//    undone, which is why a trainer with --nonfinite stop stops before anything is saved.
// A non-finite loss cancels the step before any update (the model does not run the backward then).
// The returned norm is the exact global gradient norm of the step (the groups are disjoint), for logging.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/qwen3_trainable.h"
#include "train/dist/data_parallel.h"
#include "train/optim/optimizer.h"

namespace nvfp4lm {

// Forward and backward of each micro-batch, gradients accumulated; the summed loss statistics.
LossStats accumulate_gradients(Qwen3Trainable& model, std::span<const TrainBatch> micro_batches, float grad_scale,
                               const TrainLoss& loss);

// The parts of a step, in order, as `after` callbacks see them. A fused step is one part (Backward): its optimizer
// and refresh run inside the backward.
enum class StepPart { Backward, Optimizer, Refresh };

struct UpdateResult {
  double grad_norm = 0;
  double clip_coefficient = 1;
  bool applied = false;      // false: the loss or the gradient norm was not finite, nothing was updated
  size_t update_amaxes = 0;  // masters whose amax the update measured for the refresh (UpdatedMasterAmaxes)
};

// `loss`: the step's mean loss (accumulate_gradients' stats), checked with the norm.
UpdateResult apply_update(Qwen3Trainable& model, Optimizer& optimizer, double loss, double lr, double max_grad_norm,
                          const std::function<void(StepPart)>& after = {});

struct FusedStepResult {
  LossStats stats;
  double grad_norm = 0;                     // inf/NaN when a group's gradient was not finite
  bool applied = false;                     // false: non-finite loss, nothing updated
  std::vector<std::string> skipped_groups;  // first parameter name of each group left alone
  size_t update_amaxes = 0;                 // masters whose amax the update measured for the refresh
};

FusedStepResult fused_train_step(Qwen3Trainable& model, Optimizer& optimizer, const TrainBatch& batch, float grad_scale,
                                 const TrainLoss& loss, double lr);

struct StepSettings {
  float grad_scale = 1;  // 1 / trained tokens of the whole step
  TrainLoss loss;        // cross-entropy, L1, or distillation against a teacher
  double lr = 0;
  double max_grad_norm = 0;  // unfused only: <= 0 no clipping (a fused step cannot clip)
};

struct StepResult {
  LossStats stats;  // summed over the micro-batches
  double grad_norm = 0;
  double clip_coefficient = 1;
  // false: nothing was updated (a non-finite loss, or unfused a non-finite gradient norm) and the gradients are
  // zeroed again.
  bool applied = false;
  // fused: the groups whose gradient was not finite (first parameter name), which kept their weights while the
  // rest of the step was applied.
  std::vector<std::string> skipped_groups;
  size_t update_amaxes = 0;
};

// One optimizer step over `micro_batches` (the caller zeroed the gradients): the fused or the unfused form, as the
// model was built. A fused step takes exactly one micro-batch.
// `data_parallel` (unfused, CPU; the optimizer built over its owned()): the step of train/dist/data_parallel.h —
// every rank passes the step's whole list, computes its own micro-batches, and the sums are taken in one process's
// order; with one process it is the order-fixed form of the unfused step (each micro-batch's gradient from zero,
// added to an accumulator), which N ranks reproduce bit for bit.
StepResult take_train_step(Qwen3Trainable& model, Optimizer& optimizer, std::span<const TrainBatch> micro_batches,
                           const StepSettings& settings, const std::function<void(StepPart)>& after = {},
                           DataParallel* data_parallel = nullptr);

// What training runs on: "cpu/dequant-gemm" (QAT: deq(Q(W)) in a dense GEMM) or "cpu/dense"; "cuda/..." likewise; W4A4
// on Blackwell SM 12.x "cuda/nvfp4-mma-fp4 + cuda/dequant-gemm" (the layers' forward linears NVFP4 x NVFP4).
std::string train_compute_path(Device device, QatMode qat);
// "fp32 activations, fp32 master weights, fp32 gradients", the CUDA and bf16-master forms likewise.
std::string train_precision(Device device, bool bf16_master);

}  // namespace nvfp4lm
