// CPU NVFP4 linear of ops/nvfp4_linear.h ("cpu/dequant-gemm", the reference, and "cpu/nvfp4-bf16").
#pragma once

#include "core/tensor.h"
#include "ops/cpu_matmul.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::cpu {

// x [N, in] and y [N, out] as 2-D (row-strided) F32 views; shapes were checked by the dispatcher.
// independent_rows: the streaming kernels for any N (LinearRows::Independent, ops/linear_rows.h); otherwise many
// rows go through `matmul`'s GEMM (ops/cpu_matmul.h).
void nvfp4_linear_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& y, Tensor& scratch, bool independent_rows,
                          CpuMatmul matmul);

}  // namespace nvfp4lm::cpu
