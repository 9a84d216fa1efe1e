// CPU fused lm_head + distillation loss (ops/distillation.h). Per chunk of up to kDistillationChunkRows
// non-ignored tokens: gather the student's and the teacher's hidden rows -> z [c, V] = h · Wᵀ and t [c, V] =
// ht · Wtᵀ (sgemm) -> per row (distill_row) the teacher's and the student's log-sum-exp at τ, KL, CE, the two
// argmaxes and, in place, z becomes dloss/dz · grad_scale -> dh = dz · W (scattered back to dhidden) and
// dW += dzᵀ · h (sgemm, beta = 1). Only the chunk's two logit blocks exist at any time.
#include "ops/cpu/distillation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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
    const float kl_scale = grad_scale * settings.weight * tau;  // d(τ² KL)/dz = τ (q - p)
    const float ce_scale = grad_scale * (1.0f - settings.weight);
    const auto q_lse_f = static_cast<float>(q_lse), lse_f = static_cast<float>(lse);
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) {
      const float p = exp_vectorizable(t[j] * inv_tau - t_lse_f);
      const float q = exp_vectorizable(z[j] * inv_tau - q_lse_f);
      const float softmax = exp_vectorizable(z[j] - lse_f);
      z[j] = kl_scale * (q - p) + ce_scale * softmax;
    }
    z[target] -= ce_scale;
  }
  return row;
}

}  // namespace

DistillationResult lm_head_distillation(const Tensor& hidden, const Tensor& lm_head, const Tensor& teacher_hidden,
                                        const Tensor& teacher_lm_head, const Tensor& targets,
                                        const DistillationSettings& settings, float grad_scale, Tensor* dhidden,
                                        Tensor* dweight) {
  const MatrixF32 hid = as_matrix(hidden, "lm_head_distillation hidden");
  const MatrixF32 teacher = as_matrix(teacher_hidden, "lm_head_distillation teacher hidden");
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

  const bool want_grad = dhidden != nullptr || dweight != nullptr;
  const int64_t chunk_rows = std::min<int64_t>(kDistillationChunkRows, result.tokens);
  Tensor h_chunk = Tensor::empty({chunk_rows, hidden_dim}, DType::F32);
  Tensor t_chunk = Tensor::empty({chunk_rows, teacher.cols}, DType::F32);
  Tensor student_logits = Tensor::empty({chunk_rows, vocab}, DType::F32);
  Tensor teacher_logits = Tensor::empty({chunk_rows, vocab}, DType::F32);
  Tensor dh_chunk = dhidden != nullptr ? Tensor::empty({chunk_rows, hidden_dim}, DType::F32) : Tensor();
  std::vector<RowTerms> row_terms(static_cast<size_t>(chunk_rows));

  for (int64_t first = 0; first < result.tokens; first += chunk_rows) {
    const int64_t count = std::min(chunk_rows, result.tokens - first);
    const int64_t* chunk_index = active.data() + first;
    Tensor h = h_chunk.narrow(0, 0, count);
    Tensor ht = t_chunk.narrow(0, 0, count);
    gather_target_rows(hid, chunk_index, count, h);
    gather_target_rows(teacher, chunk_index, count, ht);
    Tensor z = student_logits.narrow(0, 0, count);
    Tensor t = teacher_logits.narrow(0, 0, count);
    gemm(h, false, lm_head, true, z, 1.f, 0.f);
    gemm(ht, false, teacher_lm_head, true, t, 1.f, 0.f);

    float* z_data = z.data<float>();
    const float* t_data = t.data<float>();
#pragma omp parallel for schedule(static) if (count * vocab > 65536)
    for (int64_t r = 0; r < count; ++r) {
      row_terms[static_cast<size_t>(r)] = distill_row(z_data + r * vocab, t_data + r * vocab, vocab,
                                                      target[chunk_index[r]], settings, grad_scale, want_grad);
    }
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
      gemm(z, false, lm_head, false, dh, 1.f, 0.f);
      const float* dh_data = dh.data<float>();
      for (int64_t r = 0; r < count; ++r) {
        std::memcpy(dhid.row(chunk_index[r]), dh_data + r * hidden_dim,
                    static_cast<size_t>(hidden_dim) * sizeof(float));
      }
    }
    if (dweight != nullptr) gemm(z, true, h, false, *dweight, 1.f, 1.f);
  }
  return result;
}

}  // namespace nvfp4lm::cpu
