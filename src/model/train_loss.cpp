// Loss heads of Qwen3Trainable (see train_loss.h).
//  - CrossEntropy goes through ops/cross_entropy.h's fused lm_head + CE (chunked, ignored targets skipped);
//    distillation through ops/distillation.h's fused twin, with the teacher's hidden state and lm_head.
//  - A preference loss (DPO / IPO, model/preference_loss.h) runs the same fused op row by row, twice: once for each
//    completion's summed log-probability (no gradient), then, with every pair's derivatives known, once more with
//    each row's gradient scale (grad_scale · -d loss / d log π of the row), which is the exact gradient of the pairs'
//    losses: d log π / d logits is minus the cross-entropy's. The second pass repeats the lm_head's forward (about a
//    tenth of a Qwen3-4B forward) instead of holding [tokens, vocab] logits or writing a weighted-row kernel.
//  - A policy-gradient loss (GRPO, model/preference_loss.h) likewise: one pass for each token's log-probability
//    (the op's per-token losses), then one with each token's gradient scale (CrossEntropyTokens::scales).
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

LossStats preference_loss(const PreferenceSettings& settings, const Tensor& input, const Tensor& lm_head,
                          const Tensor& targets, int64_t row_tokens, std::span<const double> reference,
                          float grad_scale, Tensor* d_rows, Tensor* d_weight) {
  const int64_t rows = input.dim(0) / row_tokens;
  NVFP4LM_ASSERT(rows % 2 == 0 && rows > 0, "a preference batch has pairs of rows, got {} rows", rows);
  NVFP4LM_CHECK(static_cast<int64_t>(reference.size()) == rows,
                "a preference batch of {} rows carries {} reference log-probabilities (internal: the trainer attaches "
                "one a row)",
                rows, reference.size());
  auto row = [&](const Tensor& t, int64_t r) { return t.narrow(0, r * row_tokens, row_tokens); };
  std::vector<CrossEntropyResult> ce(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    ce[static_cast<size_t>(r)] = lm_head_cross_entropy(row(input, r), lm_head, row(targets, r), 0.0f, nullptr, nullptr);
  LossStats stats;
  std::vector<double> scale(static_cast<size_t>(rows));
  for (int64_t p = 0; p < rows / 2; ++p) {
    const CrossEntropyResult& chosen = ce[static_cast<size_t>(2 * p)];
    const CrossEntropyResult& rejected = ce[static_cast<size_t>(2 * p + 1)];
    NVFP4LM_CHECK(chosen.tokens > 0 && rejected.tokens > 0,
                  "preference pair {} of the batch has a completion without a trained token (internal: the data "
                  "reader drops such pairs)",
                  p);
    const PreferencePair pair{-chosen.loss_sum,
                              -rejected.loss_sum,
                              reference[static_cast<size_t>(2 * p)],
                              reference[static_cast<size_t>(2 * p + 1)],
                              chosen.tokens,
                              rejected.tokens};
    const PreferencePairLoss l = preference_pair_loss(settings, pair);
    stats.loss_sum += l.loss;
    stats.tokens += chosen.tokens + rejected.tokens;
    stats.correct += chosen.correct + rejected.correct;
    stats.pairs += 1;
    stats.chosen_reward_sum += l.chosen_reward;
    stats.rejected_reward_sum += l.rejected_reward;
    stats.chosen_logp_sum += pair.chosen_logp;
    stats.rejected_logp_sum += pair.rejected_logp;
    stats.preferred += l.chosen_reward > l.rejected_reward ? 1 : 0;
    // d log π / d(the row's cross-entropy sum) = -1.
    scale[static_cast<size_t>(2 * p)] = -l.d_chosen;
    scale[static_cast<size_t>(2 * p + 1)] = -l.d_rejected;
  }
  if (d_rows == nullptr) return stats;
  for (int64_t r = 0; r < rows; ++r) {
    Tensor d_row = row(*d_rows, r);
    lm_head_cross_entropy(row(input, r), lm_head, row(targets, r),
                          static_cast<float>(grad_scale * scale[static_cast<size_t>(r)]), &d_row, d_weight);
  }
  return stats;
}

LossStats policy_gradient_loss(const PolicyGradientSettings& settings, const Tensor& input, const Tensor& lm_head,
                               const Tensor& targets, int64_t row_tokens, const TrainBatch& batch, float grad_scale,
                               Tensor* d_rows, Tensor* d_weight) {
  const int64_t n = input.dim(0), rows = n / row_tokens;
  NVFP4LM_CHECK(static_cast<int64_t>(batch.advantages.size()) == rows,
                "a policy-gradient batch of {} rows carries {} advantages (internal: one a completion)", rows,
                batch.advantages.size());
  for (const auto* per_token : {&batch.old_logps, &batch.ref_logps})
    NVFP4LM_CHECK(per_token->empty() || static_cast<int64_t>(per_token->size()) == n,
                  "a policy-gradient batch of {} tokens carries {} per-token log-probabilities", n, per_token->size());
  NVFP4LM_CHECK(settings.beta == 0 || !batch.ref_logps.empty(),
                "a policy-gradient loss with a KL term (beta {}) needs the reference's log-probabilities",
                settings.beta);
  // Pass 1: each token's log-probability under this policy.
  Tensor token_loss = Tensor::empty({n}, DType::F32, input.device());
  const CrossEntropyResult ce =
      lm_head_cross_entropy(input, lm_head, targets, 0.0f, nullptr, nullptr, {nullptr, &token_loss});
  const Tensor host_loss = token_loss.to(Device::cpu());
  const Tensor host_targets = targets.to(Device::cpu());
  const float* ce_loss = host_loss.data<float>();
  const int32_t* target = host_targets.data<int32_t>();
  LossStats stats;
  stats.tokens = ce.tokens;
  stats.correct = ce.correct;
  std::vector<float> scale(static_cast<size_t>(n), 0.f);
  for (int64_t i = 0; i < n; ++i) {
    if (target[i] == kIgnoreIndex) continue;
    const auto at = static_cast<size_t>(i);
    const double logp = -static_cast<double>(ce_loss[i]);
    const double old = batch.old_logps.empty() ? logp : batch.old_logps[at];
    const double ref = batch.ref_logps.empty() ? logp : batch.ref_logps[at];
    const PolicyGradientToken t =
        policy_gradient_token(settings, logp, old, batch.advantages[static_cast<size_t>(i / row_tokens)], ref);
    stats.loss_sum += t.loss;
    stats.kl_sum += t.kl;
    stats.clipped += t.clipped ? 1 : 0;
    scale[at] = static_cast<float>(-t.d_logp);  // d log π / d(the token's cross-entropy) = -1
  }
  if (d_rows == nullptr) return stats;
  // Pass 2: the gradient, each token's cross-entropy gradient weighted by its own scale.
  const Tensor scales = Tensor::from_floats(scale, Shape{n}).to(input.device());
  lm_head_cross_entropy(input, lm_head, targets, grad_scale, d_rows, d_weight, {&scales, nullptr});
  return stats;
}

}  // namespace

std::vector<double> row_logps(const Tensor& input, const Tensor& lm_head, const Tensor& targets, int64_t row_tokens) {
  const int64_t rows = input.dim(0) / row_tokens;
  std::vector<double> logps(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    logps[static_cast<size_t>(r)] =
        -lm_head_cross_entropy(input.narrow(0, r * row_tokens, row_tokens), lm_head,
                               targets.narrow(0, r * row_tokens, row_tokens), 0.0f, nullptr, nullptr)
             .loss_sum;
  return logps;
}

Tensor lm_head_input(const Tensor& hidden, bool quantize_input) {
  const Tensor input = token_rows(hidden);
  if (!quantize_input) return input;
  Tensor quantized = Tensor::empty(input.shape(), input.dtype(), input.device());
  fake_quantize_nvfp4(input, quantized, Nvfp4QuantOptions{}, "W4A4 activation (lm_head input)");
  return quantized;
}

LossStats loss_head(const TrainLoss& loss, const Tensor& hidden, TrainTensor& head, bool quantize_input,
                    const Tensor& targets, float grad_scale, Tensor* d_hidden, const LossTeacher& teacher,
                    const TrainBatch* batch) {
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
  if (loss.preference) {
    NVFP4LM_ASSERT(loss.kind == LossKind::CrossEntropy && !loss.distills(),
                   "a preference loss is built on cross-entropy, without distillation");
    NVFP4LM_ASSERT(batch != nullptr, "a preference loss without its batch's reference log-probabilities");
    return preference_loss(*loss.preference, input, head.use, flat_targets, hidden.dim(1), batch->reference_logps,
                           grad_scale, d_hidden != nullptr ? &d_rows : nullptr, d_weight);
  }
  if (loss.policy_gradient) {
    NVFP4LM_ASSERT(loss.kind == LossKind::CrossEntropy && !loss.distills() && !loss.preference,
                   "a policy-gradient loss is built on cross-entropy alone");
    NVFP4LM_ASSERT(batch != nullptr, "a policy-gradient loss without its batch's advantages");
    return policy_gradient_loss(*loss.policy_gradient, input, head.use, flat_targets, hidden.dim(1), *batch, grad_scale,
                                d_hidden != nullptr ? &d_rows : nullptr, d_weight);
  }
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
