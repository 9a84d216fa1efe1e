// Kernel of the CUDA fused lm_head + distillation loss (ops/distillation.h); the chunk loop that drives it and the
// lm_head GEMMs lives in ops/distillation.cpp, built like the fused cross-entropy's (ops/cuda/cross_entropy.h:
// chunks of whole logit rows, rows with target -100 compacted away first), with a second logits buffer for the
// teacher's rows.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace nvfp4lm::cuda {

// Per-row results of distillation_rows (device arrays of `rows` entries each).
struct DistillationRowsOut {
  float* kl;         // KL(softmax(t/τ) ‖ softmax(z/τ))
  float* ce;         // logsumexp(z) - z[target]
  int32_t* correct;  // first argmax of z == target
  int32_t* agree;    // first argmax of z == first argmax of t
};

// For each of `rows` rows of student logits z and teacher logits t (both F32 or both BF16, row stride
// cross_entropy_logits_ld(vocab), 16-byte aligned): the row's terms; targets in [0, vocab). With want_grad, z becomes
// grad_scale · (weight · τ · (softmax(z/τ) - softmax(t/τ)) + (1 - weight) · (softmax(z) - onehot(target))) in place
// (padding columns 0); t is only read.
void distillation_rows(void* student_logits, const void* teacher_logits, DType dtype, int64_t rows, int64_t vocab,
                       const int32_t* targets, float temperature, float weight, float grad_scale, bool want_grad,
                       const DistillationRowsOut& out);

// The teacher's top K of each row (ops/distillation.h TeacherTopK, on the device): ids and log_probs [rows, k],
// log_rest [rows]; 1 <= k <= kMaxTopKTokens, the ids of a row distinct and in [0, vocab).
inline constexpr int kMaxTopKTokens = 256;  // = kMaxTeacherTopK
struct TeacherTopKRows {
  const int32_t* ids;
  const float* log_probs;
  const float* log_rest;
  int k;
};

// distillation_rows against the teacher's top K instead of its logits: the K + 1-outcome KL of ops/distillation.h;
// agree compares z's first argmax with the row's ids[0]. With want_grad, z becomes grad_scale · (weight · τ ·
// (softmax(z/τ) - p̃) + (1 - weight) · (softmax(z) - onehot(target))) in place, p̃ the teacher's p on the K and
// r · softmax(z/τ)_v / q_rest outside.
void distillation_topk_rows(void* student_logits, DType dtype, int64_t rows, int64_t vocab, const int32_t* targets,
                            const TeacherTopKRows& teacher, float temperature, float weight, float grad_scale,
                            bool want_grad, const DistillationRowsOut& out);

// sums = {Σ kl, Σ ce, Σ correct, Σ agree} in double, fixed summation order.
void distillation_sums(const DistillationRowsOut& rows_out, int64_t rows, double* sums);

}  // namespace nvfp4lm::cuda
