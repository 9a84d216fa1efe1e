// Loss heads of Qwen3Trainable (see train_loss.h).
//  - CrossEntropy goes through ops/cross_entropy.h's fused lm_head + CE (chunked, ignored targets skipped);
//    distillation through ops/distillation.h's fused twin, with the teacher's hidden state and lm_head.
//  - L1 (a debugging loss, no lm_head) is computed on the host in double: it is cheap (one pass over [N, H]) and
//    needs no kernel of its own; on a GPU the hidden state is copied over and the gradient copied back.
#include "model/train_loss.h"

#include <cmath>
#include <vector>

#include "ops/cross_entropy.h"
#include "ops/distillation.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::detail {
namespace {

LossStats l1_loss(const Tensor& hidden, const Tensor& targets, float grad_scale, Tensor* d_hidden) {
  const Tensor rows = token_rows(hidden);
  const int64_t n = rows.dim(0), width = rows.dim(1);
  Tensor host = Tensor::empty(rows.shape(), DType::F32, Device::cpu());
  convert_cpu(rows.to(Device::cpu()), host);
  const Tensor host_targets = targets.contiguous().to(Device::cpu());
  const float* h = host.data<float>();
  const int32_t* t = host_targets.data<int32_t>();
  Tensor grad;
  if (d_hidden != nullptr) grad = Tensor::zeros(rows.shape(), DType::F32, Device::cpu());
  LossStats stats;
  const float step = grad_scale / static_cast<float>(width);
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == kIgnoreIndex) continue;
    double row_sum = 0;
    for (int64_t j = 0; j < width; ++j) row_sum += std::fabs(static_cast<double>(h[i * width + j]));
    stats.loss_sum += row_sum / static_cast<double>(width);
    ++stats.tokens;
    if (d_hidden != nullptr) {
      float* g = grad.data<float>() + i * width;
      for (int64_t j = 0; j < width; ++j) {
        const float v = h[i * width + j];
        g[j] = v > 0.f ? step : (v < 0.f ? -step : 0.f);
      }
    }
  }
  if (d_hidden != nullptr) {
    Tensor converted = Tensor::empty(rows.shape(), d_hidden->dtype(), Device::cpu());
    convert_cpu(grad, converted);
    d_hidden->copy_from(converted.reshape(d_hidden->shape()));
  }
  return stats;
}

}  // namespace

Tensor lm_head_input(const Tensor& hidden, bool quantize_input) {
  const Tensor input = token_rows(hidden);
  if (!quantize_input) return input;
  Tensor quantized = Tensor::empty(input.shape(), input.dtype(), input.device());
  fake_quantize_nvfp4(input, quantized, Nvfp4QuantOptions{}, "W4A4 activation (lm_head input)");
  return quantized;
}

LossStats loss_head(const TrainLoss& loss, const Tensor& hidden, TrainTensor& head, bool quantize_input,
                    const Tensor& targets, float grad_scale, Tensor* d_hidden, const LossTeacher& teacher) {
  const int64_t rows = hidden.dim(0) * hidden.dim(1);
  const Tensor flat_targets = targets.reshape({rows});
  // Targets come from data: ids outside the vocabulary are Errors (the CE op checks its own).
  if (loss.kind == LossKind::L1) {
    const Tensor host = flat_targets.to(Device::cpu());
    const int32_t* t = host.data<int32_t>();
    for (int64_t i = 0; i < rows; ++i)
      NVFP4LM_CHECK(t[i] == kIgnoreIndex || (t[i] >= 0 && t[i] < head.master.dim(0)),
                    "target {} at row {} is outside the vocabulary [0, {}) (and not -100)", t[i], i,
                    head.master.dim(0));
    return l1_loss(hidden, flat_targets, grad_scale, d_hidden);
  }
  const Tensor input = lm_head_input(hidden, quantize_input);
  Tensor d_rows;
  if (d_hidden != nullptr) d_rows = token_rows(*d_hidden);
  Tensor* d_weight = d_hidden != nullptr && head.trainable() ? &head.grad : nullptr;
  if (loss.distills()) {
    DistillationResult result;
    if (loss.cached_teacher) {
      NVFP4LM_ASSERT(teacher.top_k != nullptr, "cached distillation without the batch's teacher top K");
      result = lm_head_distillation_topk(input, head.use, *teacher.top_k, flat_targets, loss.distillation, grad_scale,
                                         d_hidden != nullptr ? &d_rows : nullptr, d_weight);
    } else {
      NVFP4LM_ASSERT(teacher.hidden != nullptr, "distillation without the teacher's hidden state");
      result = lm_head_distillation(input, head.use, token_rows(*teacher.hidden), loss.teacher->lm_head_weights(),
                                    flat_targets, loss.distillation, grad_scale,
                                    d_hidden != nullptr ? &d_rows : nullptr, d_weight);
    }
    return LossStats{result.loss_sum, result.tokens, result.correct, result.kl_sum, result.agree};
  }
  const CrossEntropyResult result = lm_head_cross_entropy(input, head.use, flat_targets, grad_scale,
                                                          d_hidden != nullptr ? &d_rows : nullptr, d_weight);
  return LossStats{result.loss_sum, result.tokens, result.correct};
}

}  // namespace nvfp4lm::detail
