// CPU reference of ops/gemm.h: OpenBLAS cblas_sgemm on F32 row-strided matrices.
#pragma once

#include <string>

#include "core/tensor.h"

namespace nvfp4lm::cpu {

// Shapes were checked by the dispatcher; this checks CPU / F32 / layout.
void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c, float alpha, float beta);

// How the linked OpenBLAS runs its threads: "OpenMP", "pthreads" or "sequential" (openblas_get_parallel()).
const char* blas_threading();
// Why the CPU kernels will run slowly with this OpenBLAS ("" when they will not): its pthreads build keeps its
// threads spinning after every call, and nvfp4lm's own OpenMP kernels (dequantize, attention, norms) then fight
// them for the cores (measured 2.7x slower prefill on 2 cores, bench/NOTES.md).
std::string blas_threading_warning();

}  // namespace nvfp4lm::cpu
