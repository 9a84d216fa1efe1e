// Matrix products and the linear layer (y = x Wᵀ, no bias: Qwen3 has none), forward and backward.
// Op conventions (shared by ops/*.h; the other headers repeat them in short):
//  - Outputs are allocated by the caller with the right shape; ops never allocate results.
//  - Backward ops OVERWRITE activation gradients (=) and ACCUMULATE parameter gradients (+=), as in llm.c:
//    the caller zeroes parameter gradients once per optimizer step.
//  - CPU tensors are F32 (the fp32 reference); CUDA tensors are BF16/F32 (see the CUDA twins).
//  - 2-D operands may be row-strided views (unit inner stride, row stride = stride(0)), so a fused GEMM
//    output such as [N, q|k|v] or [N, gate|up] can be split with narrow() without copies.
//  - Shapes, dtypes and devices are internal contracts: violations are NVFP4LM_ASSERT failures.
// Here: row-major matrices; `transpose_*` transposes the operand as stored. linear_* flatten leading dims
// of x / y / dy / dx (those of rank > 2 must be contiguous) to [N, features].
#pragma once

#include "core/tensor.h"
#include "ops/linear_rows.h"

namespace nvfp4lm {

// C = alpha * op(A) op(B) + beta * C, with op(A) [M, K], op(B) [K, N], C [M, N] (all 2-D).
// beta == 0 ignores C's previous contents (NaNs included). C must not overlap A or B.
void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c, float alpha = 1.f,
          float beta = 0.f);

// y [N, out] = x [N, in] · wᵀ (w [out, in], the PyTorch / safetensors layout).
void linear_forward(const Tensor& x, const Tensor& w, Tensor& y, LinearRows rows = LinearRows::Batch);
// dx [N, in] = dy [N, out] · w (overwritten; accumulate = true adds instead, for a tensor feeding several
// linears such as the normed hidden state feeding q, k and v when they are not fused).
void linear_backward_input(const Tensor& dy, const Tensor& w, Tensor& dx, bool accumulate = false);
// dw [out, in] += dyᵀ [out, N] · x [N, in].
void linear_backward_weight(const Tensor& dy, const Tensor& x, Tensor& dw);

}  // namespace nvfp4lm
