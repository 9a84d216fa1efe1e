// The row-exact linear of batch-invariant mode (ops/batch_invariance.h): y [N, O] = x [N, K] · wᵀ (w [O, K]) where
// every output element is one thread's sum of its K products in increasing k, fp32 fused multiply-adds from 0, so
// a row of y has the same bits alone, in a batch of any size and in any chunk of a prompt. CUDA cores only: it
// reads the weight once per kRowExactRows rows of x, about what a GEMV costs for a decode step and far slower than
// a tensor-core GEMM for a long prefill (the price of the mode, bench/NOTES.md).
// x and w share a dtype (BF16, F16 or F32); y is that dtype or F32. Runs on cuda::stream(); not synchronising.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/rows.h"

namespace nvfp4lm::cuda {

inline constexpr int64_t kRowExactRows = 16;  // rows of x a thread sums at once (its accumulators)

bool row_exact_linear_supported(DType x_and_w, DType y);

// x [N, K], w [O, K], y [N, O] as DeviceRows (ops/cuda/tensor_rows.h device_matrix); dtypes and shapes are the
// caller's to check (ops/gemm.cpp linear_forward).
void row_exact_linear(const DeviceRows& x, const DeviceRows& w, const DeviceRows& y);

}  // namespace nvfp4lm::cuda
