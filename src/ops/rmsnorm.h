// RMSNorm (Qwen3RMSNorm), forward and backward:
//   rstd = 1 / sqrt(mean(x^2) + eps),   y = (x * rstd) * weight        (per row, fp32)
// x is [rows, dim] or [..., dim]; rows may have any strides (inner dim contiguous), so per-head QK-norm is
// the same op on a [tokens, heads, head_dim] view of a fused q|k|v projection. weight is [dim].
// Op conventions (shared by ops/*.h): outputs are allocated by the caller; backward ops OVERWRITE activation
// gradients (=) and ACCUMULATE parameter gradients (+=); CPU tensors are F32; shape / dtype / device mismatches
// are internal errors (NVFP4LM_ASSERT).
#pragma once

#include "core/tensor.h"

namespace nvfp4lm {

// y has x's shape (y may be x itself: in place). rstd (F32 [rows], contiguous) is optional; saving it lets
// the backward skip recomputing the row norms.
void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd = nullptr);
// dx = dL/dx (overwritten; dx may be dy itself), dweight += dL/dweight. rstd is the one the forward saved
// (a model that recomputes activations reruns the forward with rstd to get it).
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight);

}  // namespace nvfp4lm
