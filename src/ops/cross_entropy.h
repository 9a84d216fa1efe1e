// The language-model head fused with token cross-entropy, forward and backward in one call, never holding
// the whole [N, V] logits: the CPU reference works through ~64 target tokens at a time, the CUDA twin through
// as many as a 512 MiB logits buffer holds (ops/cuda/cross_entropy.h says why rows and not vocabulary chunks).
//   logits = hidden · lm_headᵀ,   loss_sum = sum over non-ignored tokens i of -log softmax(logits_i)[target_i]
// Targets equal to kIgnoreIndex (-100, PyTorch's convention) are skipped entirely — no lm_head work — which
// matters for chat data where only assistant tokens carry loss. Gradients are those of grad_scale * loss_sum
// (pass 1/tokens for a mean loss): dhidden is overwritten (ignored rows get 0), dweight is accumulated (+=).
// Op conventions (shared by ops/*.h): outputs are allocated by the caller; backward ops OVERWRITE activation
// gradients (=) and ACCUMULATE parameter gradients (+=); CPU tensors are F32; shape / dtype / device mismatches
// are internal errors (NVFP4LM_ASSERT).
// A target outside [0, V) (other than -100) is an Error, not an assertion: it comes from data.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/cpu_matmul.h"
#include "ops/linear_rows.h"

namespace nvfp4lm {

inline constexpr int32_t kIgnoreIndex = -100;

struct CrossEntropyResult {
  double loss_sum = 0.0;  // sum of per-token losses (nats) over the non-ignored tokens
  int64_t tokens = 0;     // non-ignored tokens
  int64_t correct = 0;    // non-ignored tokens whose argmax logit (first on ties) is the target
};

// Per-token extras, both optional, on the op's device: `scales` F32 [N] multiplies grad_scale token by token, so the
// gradients are those of Σ_i grad_scale · scales[i] · loss_i (a policy-gradient loss's weight a token: ignored rows
// read none); `losses` F32 [N] receives each token's loss -log softmax(logits_i)[target_i] (0 at ignored rows), the
// per-token log-probabilities such losses are built from.
struct CrossEntropyTokens {
  const Tensor* scales = nullptr;
  Tensor* losses = nullptr;
};

// hidden [N, H] (row-strided ok), lm_head [V, H], targets I32 [N] (contiguous). dhidden ([N, H]) and dweight
// ([V, H]) are optional: null skips that gradient; both null computes the loss only.
CrossEntropyResult lm_head_cross_entropy(const Tensor& hidden, const Tensor& lm_head, const Tensor& targets,
                                         float grad_scale, Tensor* dhidden, Tensor* dweight,
                                         const CrossEntropyTokens& tokens = {});

// logits [N, V] = hidden [N, H] · lm_headᵀ (inference: usually just the last position's row); `rows` as for
// linear_forward (ops/linear_rows.h). On the CPU lm_head may be F32 (sgemm) or BF16 (the inference model's
// embedding kept as stored: ops/cpu/bf16_linear.h, in `matmul`'s mode, ops/cpu_matmul.h).
void lm_head_logits(const Tensor& hidden, const Tensor& lm_head, Tensor& logits, LinearRows rows = LinearRows::Batch,
                    CpuMatmul matmul = CpuMatmul::Fp32);

}  // namespace nvfp4lm
