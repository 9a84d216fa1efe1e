// CPU reference of ops/gemm.h: OpenBLAS cblas_sgemm on F32 row-strided matrices.
#pragma once

#include "core/tensor.h"

namespace nvfp4lm::cpu {

// Shapes were checked by the dispatcher; this checks CPU / F32 / layout.
void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c, float alpha, float beta);

}  // namespace nvfp4lm::cpu
