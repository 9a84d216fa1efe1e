// Shape checks and device dispatch for ops/distillation.h, and the host side of the CUDA twin: the chunk loop over
// target rows that drives the student's and the teacher's lm_head GEMMs (public gemm(), cuBLASLt on CUDA) and the
// kernels of ops/cuda/distillation.h. Built as the fused cross-entropy's (ops/cross_entropy.cpp): targets validated
// and compacted on the host, rows in chunks of whole logit rows, one logits buffer each for the student and the
// teacher.
#include "ops/distillation.h"

#include <cmath>

#include "ops/cpu/distillation.h"
#include "ops/dispatch.h"

#if NVFP4LM_HAS_CUDA
#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "ops/cross_entropy.h"
#include "ops/cuda/cross_entropy.h"
#include "ops/cuda/distillation.h"
#include "ops/cuda/loss_targets.h"
#include "ops/cuda/tensor_rows.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#endif

namespace nvfp4lm {

#if NVFP4LM_HAS_CUDA
namespace {

// One form's work on a chunk: `z` holds the student's logits of the compacted rows [first, first + count); the form
// fills those rows' terms (chunk_out) and, with want_grad, overwrites z with the gradient.
using CudaChunkRows =
    std::function<void(int64_t first, int64_t count, Tensor& z, const cuda::DistillationRowsOut& chunk_out)>;

// The chunk loop both forms share: targets compacted, chunks of whole logit rows within the fused cross-entropy's
// logits budget (`buffers` rows of logits per token: 2 with the teacher's logits, 1 with its top K), the student's
// lm_head GEMM, the form's rows, dh and dW from the gradient, the per-row terms summed in a fixed order.
DistillationResult cuda_distill_in_chunks(const Tensor& hidden, const Tensor& lm_head,
                                          const cuda::LossTargetRows& compact, const DistillationSettings& settings,
                                          Tensor* dhidden, Tensor* dweight, int64_t buffers,
                                          const CudaChunkRows& chunk_rows_of) {
  const DType dtype = hidden.dtype();
  const Device device = hidden.device();
  NVFP4LM_ASSERT(lm_head.dtype() == dtype && (dtype == DType::BF16 || dtype == DType::F32),
                 "lm_head_distillation on CUDA: hidden {} and lm_head {} must share one dtype, BF16 or F32",
                 hidden.str(), lm_head.str());
  NVFP4LM_ASSERT(dhidden == nullptr || dhidden->dtype() == DType::BF16 || dhidden->dtype() == DType::F32,
                 "lm_head_distillation on CUDA: dhidden {} must be BF16 or F32", dhidden->str());
  NVFP4LM_ASSERT(dweight == nullptr || dweight->dtype() == DType::F32,
                 "lm_head_distillation on CUDA: dweight {} must be F32 (a parameter gradient)", dweight->str());
  const int64_t hidden_dim = hidden.dim(1), vocab = lm_head.dim(0);
  DistillationResult result;
  result.tokens = compact.tokens;
  if (result.tokens == 0) {
    if (dhidden != nullptr) fill(*dhidden, 0.f);
    return result;
  }
  const int64_t tokens = result.tokens;
  const bool all_active = compact.all_active();
  // The student's hidden rows with a target, compacted (unless that is all of them).
  const Tensor h = cuda::active_rows(hidden, compact, "lm_head_distillation hidden");
  Tensor dh;
  if (dhidden != nullptr) dh = all_active ? *dhidden : Tensor::empty({tokens, hidden_dim}, dhidden->dtype(), device);

  const int64_t ld = cuda::cross_entropy_logits_ld(vocab);
  const int64_t row_bytes = buffers * ld * static_cast<int64_t>(dtype_bytes(dtype));
  const int64_t max_rows = std::max<int64_t>(1, static_cast<int64_t>(cuda::lm_head_logits_budget_bytes()) / row_bytes);
  const int64_t chunks = (tokens + max_rows - 1) / max_rows;
  const int64_t chunk_rows = (tokens + chunks - 1) / chunks;  // balanced chunks
  Tensor student_logits = Tensor::empty({chunk_rows, ld}, dtype, device);
  Tensor row_terms = Tensor::empty({4 * tokens}, DType::F32, device);  // kl | ce | correct (I32) | agree (I32)
  auto* terms = static_cast<float*>(row_terms.raw());
  const cuda::DistillationRowsOut out{terms, terms + tokens, reinterpret_cast<int32_t*>(terms + 2 * tokens),
                                      reinterpret_cast<int32_t*>(terms + 3 * tokens)};

  for (int64_t first = 0; first < tokens; first += chunk_rows) {
    const int64_t count = std::min(chunk_rows, tokens - first);
    const Tensor h_chunk = h.narrow(0, first, count);
    Tensor z = student_logits.narrow(0, 0, count).narrow(1, 0, vocab);
    gemm(h_chunk, false, lm_head, true, z);
    chunk_rows_of(first, count, z, {out.kl + first, out.ce + first, out.correct + first, out.agree + first});
    if (dhidden != nullptr) {
      Tensor dh_chunk = dh.narrow(0, first, count);
      gemm(z, false, lm_head, false, dh_chunk);
    }
    if (dweight != nullptr) gemm(z, true, h_chunk, false, *dweight, 1.f, 1.f);
  }
  if (dhidden != nullptr && !all_active) {
    cuda::expand_rows(cuda::device_matrix(dh, "lm_head_distillation compacted dhidden"), compact.source_row,
                      cuda::device_matrix(*dhidden, "lm_head_distillation dhidden"));
  }

  Tensor sums = Tensor::empty({4 * static_cast<int64_t>(sizeof(double))}, DType::U8, device);
  cuda::distillation_sums(out, tokens, static_cast<double*>(sums.raw()));
  const Tensor host_sums = sums.to(Device::cpu());
  double values[4];
  std::memcpy(values, host_sums.raw(), sizeof(values));
  result.kl_sum = values[0];
  result.ce_sum = values[1];
  result.correct = std::llround(values[2]);
  result.agree = std::llround(values[3]);
  const double tau = settings.temperature;
  result.loss_sum =
      settings.weight * tau * tau * result.kl_sum + (1.0 - static_cast<double>(settings.weight)) * result.ce_sum;
  return result;
}

DistillationResult cuda_lm_head_distillation(const Tensor& hidden, const Tensor& lm_head, const Tensor& teacher_hidden,
                                             const Tensor& teacher_lm_head, const Tensor& targets,
                                             const DistillationSettings& settings, float grad_scale, Tensor* dhidden,
                                             Tensor* dweight) {
  const DType dtype = hidden.dtype();
  NVFP4LM_ASSERT(teacher_hidden.dtype() == dtype && teacher_lm_head.dtype() == dtype,
                 "lm_head_distillation on CUDA: teacher hidden {} and teacher lm_head {} must have the student's "
                 "dtype {}",
                 teacher_hidden.str(), teacher_lm_head.str(), dtype_name(dtype));
  (void)cuda::device_int32(targets, "lm_head_distillation targets");
  const int64_t vocab = lm_head.dim(0);
  const cuda::LossTargetRows compact = cuda::compact_loss_targets(targets, vocab, "distillation");
  if (compact.tokens == 0)
    return cuda_distill_in_chunks(hidden, lm_head, compact, settings, dhidden, dweight, 2, nullptr);
  // The teacher's hidden rows compacted like the student's, and its logits chunk beside the student's.
  const Tensor ht = cuda::active_rows(teacher_hidden, compact, "lm_head_distillation teacher hidden");
  Tensor teacher_logits;
  const bool want_grad = dhidden != nullptr || dweight != nullptr;
  return cuda_distill_in_chunks(
      hidden, lm_head, compact, settings, dhidden, dweight, 2,
      [&](int64_t first, int64_t count, Tensor& z, const cuda::DistillationRowsOut& chunk_out) {
        if (!teacher_logits.defined()) {  // sized by the first chunk, the largest
          teacher_logits = Tensor::empty({count, cuda::cross_entropy_logits_ld(vocab)}, dtype, hidden.device());
        }
        Tensor t = teacher_logits.narrow(0, 0, count).narrow(1, 0, vocab);
        gemm(ht.narrow(0, first, count), false, teacher_lm_head, true, t);
        cuda::distillation_rows(z.raw(), t.raw(), dtype, count, vocab, compact.targets + first, settings.temperature,
                                settings.weight, grad_scale, want_grad, chunk_out);
      });
}

DistillationResult cuda_lm_head_distillation_topk(const Tensor& hidden, const Tensor& lm_head,
                                                  const TeacherTopK& teacher, const Tensor& targets,
                                                  const DistillationSettings& settings, float grad_scale,
                                                  Tensor* dhidden, Tensor* dweight) {
  (void)cuda::device_int32(targets, "lm_head_distillation_topk targets");
  const int64_t vocab = lm_head.dim(0);
  const cuda::LossTargetRows compact = cuda::compact_loss_targets(targets, vocab, "distillation");
  NVFP4LM_ASSERT(teacher.rows() == compact.tokens,
                 "lm_head_distillation_topk: the teacher's top K has {} rows for {} trained tokens", teacher.rows(),
                 compact.tokens);
  const cuda::TeacherTopKRows rows{cuda::device_int32(teacher.ids, "lm_head_distillation_topk teacher ids"),
                                   static_cast<const float*>(teacher.log_probs.raw()),
                                   static_cast<const float*>(teacher.log_rest.raw()), static_cast<int>(teacher.k())};
  const bool want_grad = dhidden != nullptr || dweight != nullptr;
  return cuda_distill_in_chunks(
      hidden, lm_head, compact, settings, dhidden, dweight, 1,
      [&](int64_t first, int64_t count, Tensor& z, const cuda::DistillationRowsOut& chunk_out) {
        const cuda::TeacherTopKRows chunk{rows.ids + first * rows.k, rows.log_probs + first * rows.k,
                                          rows.log_rest + first, rows.k};
        cuda::distillation_topk_rows(z.raw(), hidden.dtype(), count, vocab, compact.targets + first, chunk,
                                     settings.temperature, settings.weight, grad_scale, want_grad, chunk_out);
      });
}

}  // namespace
#endif

DistillationResult lm_head_distillation(const Tensor& hidden, const Tensor& lm_head, const Tensor& teacher_hidden,
                                        const Tensor& teacher_lm_head, const Tensor& targets,
                                        const DistillationSettings& settings, float grad_scale, Tensor* dhidden,
                                        Tensor* dweight) {
  NVFP4LM_ASSERT(hidden.rank() == 2 && lm_head.rank() == 2 && hidden.dim(1) == lm_head.dim(1),
                 "lm_head_distillation: hidden {} must be [N, H] and lm_head {} [V, H]", hidden.str(), lm_head.str());
  NVFP4LM_ASSERT(teacher_hidden.rank() == 2 && teacher_lm_head.rank() == 2 && teacher_hidden.dim(0) == hidden.dim(0) &&
                     teacher_hidden.dim(1) == teacher_lm_head.dim(1) && teacher_lm_head.dim(0) == lm_head.dim(0),
                 "lm_head_distillation: teacher hidden {} must be [N, Ht] and teacher lm_head {} [V, Ht] (student "
                 "hidden {}, lm_head {})",
                 teacher_hidden.str(), teacher_lm_head.str(), hidden.str(), lm_head.str());
  NVFP4LM_ASSERT(targets.dtype() == DType::I32 && targets.rank() == 1 && targets.dim(0) == hidden.dim(0),
                 "lm_head_distillation: targets {} must be I32 [{}]", targets.str(), hidden.dim(0));
  NVFP4LM_ASSERT(dhidden == nullptr || dhidden->shape() == hidden.shape(),
                 "lm_head_distillation: dhidden {} vs hidden {}", dhidden->str(), hidden.str());
  NVFP4LM_ASSERT(dweight == nullptr || dweight->shape() == lm_head.shape(),
                 "lm_head_distillation: dweight {} vs lm_head {}", dweight->str(), lm_head.str());
  NVFP4LM_ASSERT(
      std::isfinite(settings.temperature) && settings.temperature > 0 && settings.weight >= 0 && settings.weight <= 1,
      "lm_head_distillation: temperature {} must be positive and weight {} in [0, 1]", settings.temperature,
      settings.weight);
  [[maybe_unused]] const Device device = common_device(
      "lm_head_distillation", {&hidden, &lm_head, &teacher_hidden, &teacher_lm_head, &targets, dhidden, dweight});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda())
    return cuda_lm_head_distillation(hidden, lm_head, teacher_hidden, teacher_lm_head, targets, settings, grad_scale,
                                     dhidden, dweight);
#endif
  return cpu::lm_head_distillation(hidden, lm_head, teacher_hidden, teacher_lm_head, targets, settings, grad_scale,
                                   dhidden, dweight);
}

}  // namespace nvfp4lm

namespace nvfp4lm {

DistillationResult lm_head_distillation_topk(const Tensor& hidden, const Tensor& lm_head, const TeacherTopK& teacher,
                                             const Tensor& targets, const DistillationSettings& settings,
                                             float grad_scale, Tensor* dhidden, Tensor* dweight) {
  NVFP4LM_ASSERT(hidden.rank() == 2 && lm_head.rank() == 2 && hidden.dim(1) == lm_head.dim(1),
                 "lm_head_distillation_topk: hidden {} must be [N, H] and lm_head {} [V, H]", hidden.str(),
                 lm_head.str());
  NVFP4LM_ASSERT(targets.dtype() == DType::I32 && targets.rank() == 1 && targets.dim(0) == hidden.dim(0),
                 "lm_head_distillation_topk: targets {} must be I32 [{}]", targets.str(), hidden.dim(0));
  NVFP4LM_ASSERT(teacher.defined() && teacher.ids.dtype() == DType::I32 && teacher.ids.rank() == 2 &&
                     teacher.k() >= 1 && teacher.k() <= kMaxTeacherTopK && teacher.k() <= lm_head.dim(0) &&
                     teacher.log_probs.dtype() == DType::F32 && teacher.log_probs.shape() == teacher.ids.shape() &&
                     teacher.log_rest.dtype() == DType::F32 && teacher.log_rest.rank() == 1 &&
                     teacher.log_rest.dim(0) == teacher.rows() && teacher.ids.is_contiguous() &&
                     teacher.log_probs.is_contiguous() && teacher.log_rest.is_contiguous(),
                 "lm_head_distillation_topk: the teacher's ids {}, log_probs {} must be contiguous I32 / F32 [M, K] "
                 "(1 <= K <= {}) and log_rest {} F32 [M]",
                 teacher.ids.str(), teacher.log_probs.str(), kMaxTeacherTopK, teacher.log_rest.str());
  NVFP4LM_ASSERT(dhidden == nullptr || dhidden->shape() == hidden.shape(),
                 "lm_head_distillation_topk: dhidden {} vs hidden {}", dhidden->str(), hidden.str());
  NVFP4LM_ASSERT(dweight == nullptr || dweight->shape() == lm_head.shape(),
                 "lm_head_distillation_topk: dweight {} vs lm_head {}", dweight->str(), lm_head.str());
  NVFP4LM_ASSERT(
      std::isfinite(settings.temperature) && settings.temperature > 0 && settings.weight >= 0 && settings.weight <= 1,
      "lm_head_distillation_topk: temperature {} must be positive and weight {} in [0, 1]", settings.temperature,
      settings.weight);
  [[maybe_unused]] const Device device = common_device(
      "lm_head_distillation_topk",
      {&hidden, &lm_head, &targets, &teacher.ids, &teacher.log_probs, &teacher.log_rest, dhidden, dweight});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda())
    return cuda_lm_head_distillation_topk(hidden, lm_head, teacher, targets, settings, grad_scale, dhidden, dweight);
#endif
  return cpu::lm_head_distillation_topk(hidden, lm_head, teacher, targets, settings, grad_scale, dhidden, dweight);
}

TeacherTopK select_teacher_top_k(const Tensor& logits, int64_t k, float temperature) {
  NVFP4LM_ASSERT(logits.device().is_cpu() && logits.dtype() == DType::F32 && logits.rank() == 2 &&
                     logits.is_contiguous() && k >= 1 && k <= kMaxTeacherTopK && k <= logits.dim(1) && temperature > 0,
                 "select_teacher_top_k: logits {} must be contiguous F32 [M, V] on the CPU, 1 <= k {} <= min(V, {})",
                 logits.str(), k, kMaxTeacherTopK);
  return cpu::select_teacher_top_k(logits, k, temperature);
}

}  // namespace nvfp4lm
