// CPU reference of ops/nvfp4_linear.h ("cpu/dequant-gemm").
#pragma once

#include "core/tensor.h"
#include "ops/cpu_matmul.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::cpu {

// x [N, in] and y [N, out] as 2-D (row-strided) F32 views; shapes were checked by the dispatcher.
void nvfp4_linear_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& y, Tensor& scratch, CpuMatmul matmul);

}  // namespace nvfp4lm::cpu
