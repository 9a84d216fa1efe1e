// Choosing tokens from logits where the logits live (for generation on the GPU: a decode step then copies back
// B int32 ids instead of B x V floats). Both ops read logits F32 [B, V] (row-strided views allowed, unit inner
// stride) and write ids I32 [B] (contiguous), on one device; CPU and CUDA implement the same definitions:
//
//  sample_argmax: the index of the largest logit of each row, the lowest on ties; NaN never wins; a row with no
//    number (all NaN) gives 0.
//
//  sample_top_k_top_p: one draw per row from the truncated softmax(logits / temperature), driven by the
//    caller's uniform u in [0, 1) for that row (uniforms F32 [B], contiguous, on the same device):
//    z = logit / temperature in fp32 (NaN counts as -inf); m = max z; each token weighs
//    W = round(exp(z - m) * 2^40) (1 when z == m), an integer, so every sum below is exact and order-free;
//    top-k keeps K = {z >= the k-th largest z} (ties at the boundary kept; top_k 0 or >= V keeps all);
//    top-p keeps S = {z in K : z >= tau}, tau the largest value with W({z in K : z >= tau}) >= ceil(top_p W(K))
//    (ties kept; top_p >= 1 keeps K); the draw is the id, in id order, where the running sum of W over S first
//    exceeds r = floor(u W(S)). Rows where every z is -inf give 0.
//    This matches infer/sampler.h (Hugging Face semantics) in distribution, not draw for draw: that sampler
//    orders candidates by probability and breaks top-p ties by id; tokens below 2^-40 of the most likely one
//    are never drawn here.
// Shapes, dtypes and devices are internal contracts (NVFP4LM_ASSERT); options are checked (Error).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace nvfp4lm {

struct TopKTopP {
  float temperature = 1.f;  // > 0; greedy decoding is sample_argmax
  int64_t top_k = 0;        // 0: off
  float top_p = 1.f;        // in (0, 1]; 1: off
};

void sample_argmax(const Tensor& logits, Tensor& ids);
void sample_top_k_top_p(const Tensor& logits, const Tensor& uniforms, const TopKTopP& options, Tensor& ids);

}  // namespace nvfp4lm
