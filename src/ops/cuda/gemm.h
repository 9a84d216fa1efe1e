// CUDA twin of ops/gemm.h: C = alpha * op(A) op(B) + beta * C on row-major matrices through cuBLASLt, fp32
// accumulation (CUBLAS_COMPUTE_32F) for every dtype. Raw-pointer launcher: ops/gemm.cpp checks shapes and turns
// Tensors into GemmMatrix.
// Dtypes (A and B always share one): BF16 x BF16 -> BF16 or F32 (the fast path: activations and weights BF16,
// F32 for parameter gradients such as dW += dyᵀ x with beta = 1, and for logits); F16 x F16 -> F16 or F32;
// F32 x F32 -> F32 (true fp32, no TF32: for tests and small models).
// Row-major is handled by computing Cᵀ = op(B)ᵀ op(A)ᵀ in cuBLAS's column-major terms, so no copies are made;
// row-strided operands (narrow()ed fused projections) are passed through their leading dimensions. The
// heuristic's algorithm is cached per (device, shape, transposes, dtypes, leading dims, pointer alignment).
// beta == 0 never reads C. C must not overlap A or B. Runs on cuda::stream(); not synchronising.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace nvfp4lm::cuda {

// A row-major matrix in device memory: rows x cols elements, ld elements between row starts (ld >= cols).
struct GemmMatrix {
  void* data = nullptr;
  DType dtype = DType::BF16;
  int64_t rows = 0, cols = 0, ld = 0;
};

bool gemm_supported(DType ab, DType c);

// op(A) [M, K] x op(B) [K, N] -> C [M, N]; transpose_* transposes the operand as stored.
void gemm(const GemmMatrix& a, bool transpose_a, const GemmMatrix& b, bool transpose_b, const GemmMatrix& c,
          float alpha, float beta);

}  // namespace nvfp4lm::cuda
