// Kernels of the CUDA fused lm_head + cross-entropy (ops/cross_entropy.h); the chunk loop that drives them and
// the lm_head GEMMs (through cuBLASLt, ops/cuda/gemm.h) lives in ops/cross_entropy.cpp.
//
// Scheme (chosen for N = 8192 tokens, V = 151936, H = 2560 on an H100): chunks of ROWS (tokens), each holding
// whole logit rows, so every row's log-sum-exp is final after one pass and the logits are never recomputed:
//   logits [c, V] = h_c · Wᵀ (BF16 out, fp32 accumulate)  ->  cross_entropy_rows: per row max, argmax and
//   sum-exp in fp32, the loss, then in place dlogits = grad_scale * (softmax - onehot) (BF16)  ->
//   dh_c = dlogits · W  and  dW += dlogitsᵀ · h_c (F32, beta = 1).
// That is the minimum of three N x V x H GEMMs. Chunking over the vocabulary instead would need the logits twice
// (lse is only known after the last vocabulary chunk): a fourth GEMM, ~10 ms at this size, against the ~1 ms per
// row chunk that re-reading and re-writing the F32 dW costs here. Rows with target -100 are compacted away before
// any GEMM. The logits buffer is the only [rows, V] allocation (budget in ops/cross_entropy.cpp).
//
// Logits / dlogits have the lm_head's dtype (BF16, or F32 for F32 models); like Hugging Face, the loss is taken
// from BF16 logits, computed in fp32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/rows.h"

namespace nvfp4lm::cuda {

// Bytes the fused lm_head losses (this one and ops/distillation.h) may spend on [rows, V] logits buffers: 512 MiB, or
// NVFP4LM_CE_LOGITS_BYTES (less memory, or more rows per chunk: fewer passes over the F32 dW). Host code.
size_t lm_head_logits_budget_bytes();

// Rows of the logits buffer are padded to a multiple of 8 elements so every row starts on 16 bytes.
inline int64_t cross_entropy_logits_ld(int64_t vocab) { return (vocab + 7) / 8 * 8; }

// For each of `rows` rows of logits (F32 or BF16, row stride ld = cross_entropy_logits_ld(vocab), 16-byte
// aligned): row_loss = logsumexp(z) - z[target], row_correct = (first argmax == target); targets must be in
// [0, vocab). With want_grad the row becomes s * (softmax(z) - onehot(target)) in place (padding columns set to
// 0), s = grad_scale, times row_scales[row] when given (per-token weights, ops/cross_entropy.h CrossEntropyTokens).
void cross_entropy_rows(void* logits, DType dtype, int64_t rows, int64_t vocab, const int32_t* targets,
                        float grad_scale, const float* row_scales, bool want_grad, float* row_loss,
                        int32_t* row_correct);

// sums[0] = sum of row_loss (double), sums[1] = number of correct rows (as a double); fixed summation order.
void cross_entropy_sums(const float* row_loss, const int32_t* row_correct, int64_t rows, double* sums);

// dst row i = src row source_row[i], or zeros where source_row[i] < 0 (one dtype, F32 or BF16): puts the
// compacted dhidden rows back in place and zeroes the ignored ones.
void expand_rows(const DeviceRows& src, const int32_t* source_row, const DeviceRows& dst);

}  // namespace nvfp4lm::cuda
