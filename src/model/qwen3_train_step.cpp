// Qwen3Trainable's forward / backward over a batch (see qwen3_trainable.h):
//   x = embed(ids); frozen blocks run in place without saving; trained blocks save their activations;
//   h = final_norm(x); loss head (CE through the lm_head, distillation against a teacher's forward, or L1);
//   backward: final norm, trained blocks top-down, then the embedding (when trained).
// With fused_update, each group of parameters goes to the GradientSink as soon as its gradients are final.
// Buffers are allocated per call: the residual stream of every trained block (its saved input) plus one set of
// gradient work buffers shared by all blocks; without recompute every trained block's activations, with
// Recompute::Block one set that each block's forward re-fills right before its backward.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/memory.h"
#include "io/weight_names.h"
#include "model/qwen3_trainable.h"
#include "model/train_loss.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/rmsnorm.h"

namespace nvfp4lm {
namespace {

void check_batch_tensor(const Tensor& t, const char* what, int64_t batch, int64_t tokens) {
  NVFP4LM_CHECK(t.dtype() == DType::I32 && t.rank() == 2 && t.dim(0) == batch && t.dim(1) == tokens,
                "batch {} is {}, expected I32 [{}, {}] like the ids", what, t.str(), batch, tokens);
}

}  // namespace

const RopeTable& Qwen3Trainable::rope_for(int64_t max_position) {
  if (!rope_ || rope_->max_positions() <= max_position) {
    rope_.emplace(config_.head_dim, static_cast<float>(config_.rope_theta), rope_table_positions(max_position + 1),
                  options_.device);
  }
  return *rope_;
}

LossStats Qwen3Trainable::forward_backward(const TrainBatch& batch, float grad_scale, const TrainLoss& loss,
                                           const GradientSink* sink) {
  NVFP4LM_ASSERT((sink != nullptr) == options_.fused_update,
                 "forward_backward: a gradient sink goes with fused_update, and only with it");
  return run(batch, grad_scale, loss, true, sink);
}

LossStats Qwen3Trainable::evaluate(const TrainBatch& batch, const TrainLoss& loss) {
  return run(batch, 0.0f, loss, false, nullptr);
}

Tensor Qwen3Trainable::final_hidden(const TrainBatch& batch) {
  Tensor hidden;
  run(batch, 0.0f, TrainLoss{}, false, nullptr, &hidden);
  return hidden;
}

Tensor Qwen3Trainable::logits(const TrainBatch& batch) {
  const Tensor input = detail::lm_head_input(final_hidden(batch), options_.qat == QatMode::W4A4 && lm_head_.quantized);
  Tensor out = Tensor::empty({input.dim(0), lm_head_.use.dim(0)}, DType::F32, options_.device);
  linear_forward(input, lm_head_.use, out);
  return out;
}

std::vector<double> Qwen3Trainable::completion_logps(const TrainBatch& batch) {
  const Tensor hidden = final_hidden(batch);
  const Tensor input = detail::lm_head_input(hidden, options_.qat == QatMode::W4A4 && lm_head_.quantized);
  const Tensor targets = batch.targets.contiguous().to(options_.device).reshape({input.dim(0)});
  return detail::row_logps(input, lm_head_.use, targets, hidden.dim(1));
}

LossStats Qwen3Trainable::run(const TrainBatch& batch, float grad_scale, const TrainLoss& loss, bool backward,
                              const GradientSink* sink, Tensor* hidden_out) {
  NVFP4LM_CHECK(
      batch.ids.defined() && batch.ids.dtype() == DType::I32 && batch.ids.rank() == 2 && batch.ids.numel() > 0,
      "batch ids must be a non-empty I32 [batch, tokens] tensor, got {}",
      batch.ids.defined() ? batch.ids.str() : "none");
  const int64_t b = batch.ids.dim(0), t = batch.ids.dim(1), h = config_.hidden_size;
  NVFP4LM_CHECK(batch.targets.defined(), "batch has no targets");
  check_batch_tensor(batch.targets, "targets", b, t);
  const Device device = options_.device;
  const DType dtype = compute_dtype();
  const Tensor ids = batch.ids.contiguous().to(device);
  const Tensor targets = batch.targets.contiguous().to(device);

  Tensor positions;
  int64_t max_position = t - 1;
  if (batch.positions.defined()) {
    check_batch_tensor(batch.positions, "positions", b, t);
    const Tensor host = batch.positions.contiguous().to(Device::cpu());
    const int32_t* p = host.data<int32_t>();
    const auto [lo, hi] = std::minmax_element(p, p + host.numel());
    NVFP4LM_CHECK(*lo >= 0, "batch positions: {} is negative", *lo);
    max_position = *hi;
    positions = host.to(device);
  } else {
    std::vector<int32_t> values(static_cast<size_t>(b * t));
    for (int64_t i = 0; i < b * t; ++i) values[static_cast<size_t>(i)] = static_cast<int32_t>(i % t);
    positions = Tensor::from_ints(values, Shape{b, t}).to(device);
  }
  Tensor segments;
  if (batch.segment_ids.defined()) {
    check_batch_tensor(batch.segment_ids, "segment_ids", b, t);
    segments = batch.segment_ids.contiguous().to(device);
  }

  // Distillation: the teacher's forward first (frozen, on this device), so its work buffers are gone before this
  // forward saves its own activations; only its final hidden state stays.
  Tensor teacher_hidden;
  TeacherTopK teacher_top_k;
  NVFP4LM_ASSERT(!loss.distills() || loss.kind == LossKind::CrossEntropy,
                 "distillation mixes with cross-entropy, not with {}", loss_kind_name(loss.kind));
  if (loss.cached_teacher) {
    NVFP4LM_ASSERT(loss.teacher == nullptr, "a loss with a teacher model and a cached teacher");
    NVFP4LM_CHECK(batch.teacher_top_k.defined(),
                  "distillation from a cached teacher, but the batch carries no teacher top K (internal: the "
                  "trainer attaches them from the cache)");
    teacher_top_k = batch.teacher_top_k.to(device);
  }
  if (loss.teacher != nullptr) {
    NVFP4LM_ASSERT(loss.teacher != this, "distillation needs a teacher other than the student");
    NVFP4LM_CHECK(loss.teacher->device() == device && loss.teacher->compute_dtype() == dtype,
                  "the teacher runs on {} in {}, the student on {} in {}: distillation needs both on one device",
                  loss.teacher->device().str(), dtype_name(loss.teacher->compute_dtype()), device.str(),
                  dtype_name(dtype));
    NVFP4LM_CHECK(loss.teacher->lm_head_weights().dim(0) == lm_head_.use.dim(0),
                  "the teacher's vocabulary has {} tokens, the student's {}: distillation compares distributions over "
                  "one vocabulary",
                  loss.teacher->lm_head_weights().dim(0), lm_head_.use.dim(0));
    const MemoryPhase teacher_phase("teacher forward");
    teacher_hidden = loss.teacher->final_hidden(batch);
  }

  detail::BlockContext context;
  context.config = &config_;
  context.positions = &positions;
  context.segment_ids = segments.defined() ? &segments : nullptr;
  context.rope = &rope_for(max_position);
  context.quantize_activations = options_.qat == QatMode::W4A4;
  context.native_w4a4 = native_w4a4_;
  context.calibration = calibration_;
  context.lora = LoraPass{backward, batch.dropout_seed};  // dropout in training passes only
  if (calibration_) calibration_->tokens += b * t;
  const bool w4a4 = context.quantize_activations;

  const int layers = static_cast<int>(layers_.size());
  const bool any_backward = backward && !trainable_.empty();
  const int first_saved = any_backward ? first_trained_layer_ : layers;

  std::optional<MemoryPhase> phase(std::in_place, "forward");
  Tensor x = Tensor::empty({b, t, h}, dtype, device);
  embedding_forward(ids, embed_.use, x);
  if (first_saved > 0) {
    detail::BlockActivations scratch = detail::make_block_activations(config_, x, false, w4a4);
    for (int l = 0; l < first_saved; ++l) {
      unpack_layer(layers_[static_cast<size_t>(l)]);
      detail::block_forward(layers_[static_cast<size_t>(l)], context, scratch, x);
    }
  }
  const bool recompute = options_.recompute == Recompute::Block;
  std::vector<detail::BlockActivations> saved;  // per trained block; with recompute only x_in is kept
  saved.reserve(static_cast<size_t>(layers - first_saved));
  std::optional<detail::BlockActivations> shared;  // recompute: the one set every block's forward fills
  for (int l = first_saved; l < layers; ++l) {
    Tensor next = Tensor::empty({b, t, h}, dtype, device);
    unpack_layer(layers_[static_cast<size_t>(l)]);
    if (recompute) {
      if (!shared) shared = detail::make_block_activations(config_, x, true, w4a4);
      shared->x_in = x;
      detail::block_forward(layers_[static_cast<size_t>(l)], context, *shared, next);
      saved.push_back(detail::BlockActivations{});
      saved.back().x_in = x;
    } else {
      saved.push_back(detail::make_block_activations(config_, x, true, w4a4));
      detail::block_forward(layers_[static_cast<size_t>(l)], context, saved.back(), next);
    }
    x = next;
  }
  Tensor hidden = Tensor::empty({b, t, h}, dtype, device);
  Tensor final_rstd = Tensor::empty({b * t}, DType::F32, device);
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  rmsnorm_forward(x, final_norm_.use, eps, hidden, &final_rstd);
  if (hidden_out != nullptr) {
    *hidden_out = hidden;
    return {};
  }
  if (calibration_) {
    static const std::string lm_head_name(kLmHeadWeightName);
    detail::record_input_amax(*calibration_, hidden, {&lm_head_name});
  }

  Tensor d_hidden;
  if (any_backward) d_hidden = Tensor::empty({b, t, h}, dtype, device);
  const LossStats stats = detail::loss_head(
      loss, hidden, lm_head_, w4a4 && lm_head_.quantized, targets, grad_scale, any_backward ? &d_hidden : nullptr,
      {teacher_hidden.defined() ? &teacher_hidden : nullptr, teacher_top_k.defined() ? &teacher_top_k : nullptr},
      &batch);
  if (!any_backward) return stats;
  // Fused update: a non-finite loss means nothing of this step may be applied; the caller sees the loss.
  if (sink != nullptr && !std::isfinite(stats.loss_sum)) return stats;
  if (sink != nullptr)
    deliver(*sink, lm_head_group_, [this](UpdatedMasterAmaxes* updated) { refresh_lm_head(updated); });

  // Backward. A frozen final norm still passes the gradient down (into a throw-away weight gradient).
  phase.reset();
  phase.emplace("backward");
  Tensor d_resid = Tensor::empty({b, t, h}, dtype, device);
  detail::BlockGradBuffers buffers(config_, b, t, dtype, device);
  rmsnorm_backward(d_hidden, x, final_norm_.use, final_rstd, d_resid,
                   detail::norm_weight_grad(final_norm_, buffers.discarded_hidden_norm_grad));
  if (sink != nullptr) deliver(*sink, final_norm_group_, [this](UpdatedMasterAmaxes*) { refresh_final_norm(); });
  Tensor recomputed_out;  // recompute: the re-run block's output (unused; the next block's input is saved)
  if (recompute && layers - first_saved > 1) recomputed_out = Tensor::empty({b, t, h}, dtype, device);
  for (int l = layers - 1; l >= first_saved; --l) {
    detail::TrainLayer& layer = layers_[static_cast<size_t>(l)];
    detail::BlockActivations& acts = saved[static_cast<size_t>(l - first_saved)];
    // The top block's packed weights (packed_weights) are still unpacked from the forward; the others are not.
    if (l != layers - 1) unpack_layer(layer);
    if (recompute) {
      // The top block's activations are still in `shared` from the forward; every other block runs again.
      if (l != layers - 1) {
        shared->x_in = acts.x_in;
        detail::block_forward(layer, context, *shared, recomputed_out);
      }
      detail::block_backward(layer, context, *shared, buffers, d_resid);
    } else {
      detail::block_backward(layer, context, acts, buffers, d_resid);
    }
    if (sink != nullptr)
      deliver(*sink, layer_groups_[static_cast<size_t>(l)],
              [&](UpdatedMasterAmaxes* updated) { refresh_layer(layer, updated); });
  }
  if (embed_.trainable()) embedding_backward(ids, d_resid, embed_.grad);
  if (sink != nullptr)
    deliver(*sink, embed_group_, [this](UpdatedMasterAmaxes* updated) { refresh_embedding(updated); });
  return stats;
}

}  // namespace nvfp4lm
