// CPU fused lm_head + distillation losses (ops/distillation.h), the teacher's logits computed (lm_head_distillation)
// or its top K given (lm_head_distillation_topk). One chunk loop (distill_in_chunks) over up to
// kDistillationChunkRows non-ignored tokens at a time: gather the student's hidden rows -> z [c, V] = h · Wᵀ (sgemm)
// -> per row the teacher's and the student's log-sum-exps at τ, KL, CE, the argmaxes and, in place, z becomes
// dloss/dz · grad_scale -> dh = dz · W (scattered back to dhidden) and dW += dzᵀ · h (sgemm, beta = 1). The dense
// form adds the teacher's rows t [c, V] = ht · Wtᵀ. Only the chunk's logit blocks exist at any time.
#include "ops/cpu/distillation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "ops/cpu/cross_entropy.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/vector_math.h"
#include "ops/cpu/views.h"
#include "ops/cross_entropy.h"

namespace nvfp4lm::cpu {
namespace {

struct RowTerms {
  double kl = 0, ce = 0;
  bool correct = false, agree = false;
};

struct RowMax {
  float value;
  int64_t index;  // first maximal index, like torch.argmax
};

RowMax row_max(const float* x, int64_t vocab) {
  float value = x[0];
#pragma omp simd reduction(max : value)
  for (int64_t j = 0; j < vocab; ++j) value = std::max(value, x[j]);
  int64_t index = 0;
  while (index + 1 < vocab && x[index] != value) ++index;  // bounded: NaN logits never compare equal
  return {value, index};
}

// log Σ_j exp(x_j · scale), from the row's maximum (x_j - max <= 0, so nothing overflows).
double log_sum_exp(const float* x, int64_t vocab, float max, float scale) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < vocab; ++j) sum += exp_vectorizable((x[j] - max) * scale);
  return static_cast<double>(max) * scale + std::log(sum);
}

// dloss/dz of the cross-entropy part at τ = 1 added to the KL part's, as both forms write it.
struct GradScales {
  float kl, ce;  // grad_scale · weight · τ and grad_scale · (1 - weight)
};
GradScales grad_scales(const DistillationSettings& settings, float grad_scale) {
  return {grad_scale * settings.weight * settings.temperature, grad_scale * (1.0f - settings.weight)};
}

// One row: z (student logits) and t (teacher logits) -> the row's KL(p ‖ q) at τ, CE at τ = 1 and the argmax
// checks; with want_grad, z becomes grad_scale · dloss/dz (ops/distillation.h has the formulas).
RowTerms distill_row(float* z, const float* t, int64_t vocab, int32_t target, const DistillationSettings& settings,
                     float grad_scale, bool want_grad) {
  const float tau = settings.temperature;
  const float inv_tau = 1.0f / tau;
  const RowMax t_max = row_max(t, vocab);
  const RowMax z_max = row_max(z, vocab);
  const double t_lse = log_sum_exp(t, vocab, t_max.value, inv_tau);  // log Σ exp(t / τ)
  const double q_lse = log_sum_exp(z, vocab, z_max.value, inv_tau);  // log Σ exp(z / τ)
  const double lse = tau == 1.0f ? q_lse : log_sum_exp(z, vocab, z_max.value, 1.0f);
  RowTerms row;
  // KL = Σ p_v (log p_v - log q_v), log p_v - log q_v = (t_v - z_v) / τ + (q_lse - t_lse).
  const auto t_lse_f = static_cast<float>(t_lse);
  const double offset = q_lse - t_lse;
  double kl = 0.0;
#pragma omp simd reduction(+ : kl)
  for (int64_t j = 0; j < vocab; ++j) {
    const float p = exp_vectorizable(t[j] * inv_tau - t_lse_f);
    kl += static_cast<double>(p) * (static_cast<double>(t[j] - z[j]) * inv_tau + offset);
  }
  row.kl = kl;
  row.ce = lse - z[target];
  row.correct = z_max.index == target;
  row.agree = z_max.index == t_max.index;
  if (want_grad) {
    const GradScales scale = grad_scales(settings, grad_scale);  // d(τ² KL)/dz = τ (q - p)
    const auto q_lse_f = static_cast<float>(q_lse), lse_f = static_cast<float>(lse);
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) {
      const float p = exp_vectorizable(t[j] * inv_tau - t_lse_f);
      const float q = exp_vectorizable(z[j] * inv_tau - q_lse_f);
      const float softmax = exp_vectorizable(z[j] - lse_f);
      z[j] = scale.kl * (q - p) + scale.ce * softmax;
    }
    z[target] -= scale.ce;
  }
  return row;
}

// One form's rows of a chunk: row r of `z` (count x vocab) is the student's logits of the token `chunk_index[r]`, the
// chunk's first token being the `first`-th non-ignored one; fills terms[r] and, with want_grad, overwrites z.
using ChunkRows = std::function<void(int64_t first, int64_t count, const int64_t* chunk_index, const Tensor& h,
                                     float* z, RowTerms* terms)>;

DistillationResult distill_in_chunks(const Tensor& hidden, const Tensor& lm_head, const Tensor& targets,
                                     const DistillationSettings& settings, Tensor* dhidden, Tensor* dweight,
                                     const ChunkRows& chunk_rows_of) {
  const MatrixF32 hid = as_matrix(hidden, "lm_head_distillation hidden");
  const int32_t* target = int32_data(targets, "lm_head_distillation targets");
  const int64_t rows = hid.rows, hidden_dim = hid.cols, vocab = lm_head.dim(0);
  MatrixF32 dhid;
  if (dhidden != nullptr) dhid = as_matrix(*dhidden, "lm_head_distillation dhidden");
  if (dweight != nullptr) (void)as_matrix(*dweight, "lm_head_distillation dweight");  // layout check

  const std::vector<int64_t> active =
      active_target_rows(target, rows, vocab, dhidden != nullptr ? &dhid : nullptr, "distillation");
  DistillationResult result;
  result.tokens = static_cast<int64_t>(active.size());
  if (active.empty()) return result;

  const int64_t chunk_rows = std::min<int64_t>(kDistillationChunkRows, result.tokens);
  Tensor h_chunk = Tensor::empty({chunk_rows, hidden_dim}, DType::F32);
  Tensor student_logits = Tensor::empty({chunk_rows, vocab}, DType::F32);
  Tensor dh_chunk = dhidden != nullptr ? Tensor::empty({chunk_rows, hidden_dim}, DType::F32) : Tensor();
  std::vector<RowTerms> row_terms(static_cast<size_t>(chunk_rows));

  for (int64_t first = 0; first < result.tokens; first += chunk_rows) {
    const int64_t count = std::min(chunk_rows, result.tokens - first);
    const int64_t* chunk_index = active.data() + first;
    Tensor h = h_chunk.narrow(0, 0, count);
    gather_target_rows(hid, chunk_index, count, h);
    Tensor z = student_logits.narrow(0, 0, count);
    cpu::gemm(h, false, lm_head, true, z, 1.f, 0.f);
    chunk_rows_of(first, count, chunk_index, h, z.data<float>(), row_terms.data());
    const double kl_factor = static_cast<double>(settings.weight) * settings.temperature * settings.temperature;
    const double ce_factor = 1.0 - static_cast<double>(settings.weight);
    for (int64_t r = 0; r < count; ++r) {
      const RowTerms& row = row_terms[static_cast<size_t>(r)];
      result.kl_sum += row.kl;
      result.ce_sum += row.ce;
      result.loss_sum += kl_factor * row.kl + ce_factor * row.ce;
      result.correct += row.correct;
      result.agree += row.agree;
    }
    if (dhidden != nullptr) {
      Tensor dh = dh_chunk.narrow(0, 0, count);
      cpu::gemm(z, false, lm_head, false, dh, 1.f, 0.f);
      const float* dh_data = dh.data<float>();
      for (int64_t r = 0; r < count; ++r) {
        std::memcpy(dhid.row(chunk_index[r]), dh_data + r * hidden_dim,
                    static_cast<size_t>(hidden_dim) * sizeof(float));
      }
    }
    if (dweight != nullptr) cpu::gemm(z, true, h, false, *dweight, 1.f, 1.f);
  }
  return result;
}

// One row against the teacher's top K (ops/distillation.h): the student's maxima over all tokens and over the tokens
// outside the K, the log-sum-exps at τ (all, outside) and at 1, then KL over the K + 1 outcomes, CE, the argmax
// checks and, with want_grad, the gradient over z. `outside`: vocab flags, all 1 on entry and on return.
RowTerms distill_topk_row(float* z, int64_t vocab, int32_t target, const int32_t* ids, const float* log_p,
                          float log_rest, int64_t k, const DistillationSettings& settings, float grad_scale,
                          bool want_grad, std::vector<uint8_t>& outside) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  const float tau = settings.temperature, inv_tau = 1.0f / tau;
  const uint8_t* out = outside.data();
  for (int64_t i = 0; i < k; ++i) outside[static_cast<size_t>(ids[i])] = 0;
  const RowMax z_max = row_max(z, vocab);
  float tail_max = kMinusInf;
#pragma omp simd reduction(max : tail_max)
  for (int64_t v = 0; v < vocab; ++v) tail_max = std::max(tail_max, out[v] != 0 ? z[v] : kMinusInf);
  const double q_lse = log_sum_exp(z, vocab, z_max.value, inv_tau);  // log Σ exp(z / τ)
  const double lse = tau == 1.0f ? q_lse : log_sum_exp(z, vocab, z_max.value, 1.0f);
  double tail_lse = -std::numeric_limits<double>::infinity();  // log Σ_{v ∉ K} exp(z_v / τ); -inf: K is everything
  if (tail_max != kMinusInf) {
    double tail_sum = 0.0;
#pragma omp simd reduction(+ : tail_sum)
    for (int64_t v = 0; v < vocab; ++v) tail_sum += out[v] != 0 ? exp_vectorizable((z[v] - tail_max) * inv_tau) : 0.f;
    tail_lse = static_cast<double>(tail_max) * inv_tau + std::log(tail_sum);
  }
  RowTerms row;
  for (int64_t i = 0; i < k; ++i) {
    const double lp = log_p[i];
    row.kl += std::exp(lp) * (lp - (static_cast<double>(z[ids[i]]) * inv_tau - q_lse));
  }
  const bool has_rest = std::exp(static_cast<double>(log_rest)) > 0;
  if (has_rest) row.kl += std::exp(static_cast<double>(log_rest)) * (log_rest - (tail_lse - q_lse));
  row.ce = lse - z[target];
  row.correct = z_max.index == target;
  row.agree = z_max.index == ids[0];
  if (want_grad) {
    const GradScales scale = grad_scales(settings, grad_scale);
    // Outside the K the teacher's share of v is q_v · r / q_rest = exp(z_v / τ - tail_lse + log r).
    const auto q_lse_f = static_cast<float>(q_lse), lse_f = static_cast<float>(lse);
    const auto rest_shift = static_cast<float>(log_rest - tail_lse);
#pragma omp simd
    for (int64_t v = 0; v < vocab; ++v) {
      const float q = exp_vectorizable(z[v] * inv_tau - q_lse_f);
      const float rest = has_rest && out[v] != 0 ? exp_vectorizable(z[v] * inv_tau + rest_shift) : 0.f;
      const float softmax = exp_vectorizable(z[v] - lse_f);
      z[v] = scale.kl * (q - rest) + scale.ce * softmax;
    }
    for (int64_t i = 0; i < k; ++i) z[ids[i]] -= scale.kl * std::exp(log_p[i]);
    z[target] -= scale.ce;
  }
  for (int64_t i = 0; i < k; ++i) outside[static_cast<size_t>(ids[i])] = 1;
  return row;
}

}  // namespace

DistillationResult lm_head_distillation(const Tensor& hidden, const Tensor& lm_head, const Tensor& teacher_hidden,
                                        const Tensor& teacher_lm_head, const Tensor& targets,
                                        const DistillationSettings& settings, float grad_scale, Tensor* dhidden,
                                        Tensor* dweight) {
  const MatrixF32 teacher = as_matrix(teacher_hidden, "lm_head_distillation teacher hidden");
  const int32_t* target = int32_data(targets, "lm_head_distillation targets");
  const int64_t vocab = lm_head.dim(0);
  const bool want_grad = dhidden != nullptr || dweight != nullptr;
  Tensor teacher_logits, t_chunk;
  return distill_in_chunks(
      hidden, lm_head, targets, settings, dhidden, dweight,
      [&](int64_t, int64_t count, const int64_t* chunk_index, const Tensor&, float* z_data, RowTerms* terms) {
        if (!teacher_logits.defined()) {  // sized by the first chunk, the largest
          teacher_logits = Tensor::empty({count, vocab}, DType::F32);
          t_chunk = Tensor::empty({count, teacher.cols}, DType::F32);
        }
        Tensor ht = t_chunk.narrow(0, 0, count);
        gather_target_rows(teacher, chunk_index, count, ht);
        Tensor t = teacher_logits.narrow(0, 0, count);
        cpu::gemm(ht, false, teacher_lm_head, true, t, 1.f, 0.f);
        const float* t_data = t.data<float>();
#pragma omp parallel for schedule(static) if (count * vocab > 65536)
        for (int64_t r = 0; r < count; ++r) {
          terms[r] = distill_row(z_data + r * vocab, t_data + r * vocab, vocab, target[chunk_index[r]], settings,
                                 grad_scale, want_grad);
        }
      });
}

DistillationResult lm_head_distillation_topk(const Tensor& hidden, const Tensor& lm_head, const TeacherTopK& teacher,
                                             const Tensor& targets, const DistillationSettings& settings,
                                             float grad_scale, Tensor* dhidden, Tensor* dweight) {
  const int32_t* target = int32_data(targets, "lm_head_distillation_topk targets");
  const int32_t* ids = int32_data(teacher.ids, "lm_head_distillation_topk teacher ids");
  const float* log_p = as_matrix(teacher.log_probs, "lm_head_distillation_topk teacher log_probs").data;
  const float* log_rest = as_matrix(teacher.log_rest, "lm_head_distillation_topk teacher log_rest").data;
  const int64_t vocab = lm_head.dim(0), k = teacher.k();
  const bool want_grad = dhidden != nullptr || dweight != nullptr;
  // The teacher's rows are the trained tokens in order: checked against the driver's own compaction, each chunk
  // before its rows are read and the total at the end.
  const DistillationResult result = distill_in_chunks(
      hidden, lm_head, targets, settings, dhidden, dweight,
      [&](int64_t first, int64_t count, const int64_t* chunk_index, const Tensor&, float* z_data, RowTerms* terms) {
        NVFP4LM_ASSERT(first + count <= teacher.rows(),
                       "lm_head_distillation_topk: the teacher's top K has {} rows for more trained tokens",
                       teacher.rows());
#pragma omp parallel if (count * vocab > 65536)
        {
          std::vector<uint8_t> outside(static_cast<size_t>(vocab), 1);
#pragma omp for schedule(static)
          for (int64_t r = 0; r < count; ++r) {
            const int64_t m = first + r;  // the teacher's row: the m-th trained token
            terms[r] = distill_topk_row(z_data + r * vocab, vocab, target[chunk_index[r]], ids + m * k, log_p + m * k,
                                        log_rest[m], k, settings, grad_scale, want_grad, outside);
          }
        }
      });
  NVFP4LM_ASSERT(result.tokens == teacher.rows(),
                 "lm_head_distillation_topk: the teacher's top K has {} rows for {} trained tokens", teacher.rows(),
                 result.tokens);
  return result;
}

TeacherTopK select_teacher_top_k(const Tensor& logits, int64_t k, float temperature) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  TeacherTopK top{Tensor::empty({rows, k}, DType::I32), Tensor::empty({rows, k}, DType::F32),
                  Tensor::empty({rows}, DType::F32)};
  const float* z = logits.data<float>();
  int32_t* ids = top.ids.data<int32_t>();
  float* log_p = top.log_probs.data<float>();
  float* log_rest = top.log_rest.data<float>();
  const double inv_tau = 1.0 / temperature;
#pragma omp parallel
  {
    std::vector<int32_t> order(static_cast<size_t>(vocab));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = z + r * vocab;
      for (int64_t v = 0; v < vocab; ++v) order[static_cast<size_t>(v)] = static_cast<int32_t>(v);
      // Most likely first, the lower id first on ties (the first argmax, as torch.argmax).
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      const double max = row[order[0]];
      double sum = 0.0, rest_sum = 0.0, rest_max = -std::numeric_limits<double>::infinity();
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp((row[v] - max) * inv_tau);
      for (int64_t i = k; i < vocab; ++i) rest_max = std::max(rest_max, static_cast<double>(row[order[i]]));
      for (int64_t i = k; i < vocab; ++i) rest_sum += std::exp((row[order[i]] - rest_max) * inv_tau);
      const double lse = max * inv_tau + std::log(sum);
      for (int64_t i = 0; i < k; ++i) {
        ids[r * k + i] = order[static_cast<size_t>(i)];
        log_p[r * k + i] = static_cast<float>(row[order[i]] * inv_tau - lse);
      }
      log_rest[r] = k < vocab ? static_cast<float>(rest_max * inv_tau + std::log(rest_sum) - lse)
                              : -std::numeric_limits<float>::infinity();
    }
  }
  return top;
}

}  // namespace nvfp4lm::cpu
