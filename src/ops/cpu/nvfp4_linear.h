// CPU NVFP4 linear of ops/nvfp4_linear.h ("cpu/dequant-gemm", the reference, and "cpu/nvfp4-bf16").
#pragma once

#include "core/tensor.h"
#include "ops/cpu_matmul.h"
#include "ops/linear_rows.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::cpu {

// x [N, in] and y [N, out] as 2-D (row-strided) F32 views; shapes were checked by the dispatcher.
// rows (ops/linear_rows.h): Independent takes the streaming kernels for any N; Prefill takes `matmul`'s many-row
// kernel for any N (Fp32: the streaming kernels); Batch takes the streaming kernels for few rows and `matmul`'s GEMM
// (ops/cpu_matmul.h) for more.
void nvfp4_linear_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& y, Tensor& scratch, LinearRows rows,
                          CpuMatmul matmul);

// Whether this CPU runs the integer decode kernel on the interleaved layout (ops/cpu/nvfp4_interleaved.h): the
// AVX-512 VNNI + VBMI variant is the chosen interleaved int8 kernel (nvfp4_interleaved_family(), so NVFP4LM_CPU_ISA can
// turn it off).
bool int8_decode_interleaves();
// w (Rows, on the CPU) in Nvfp4Layout::Interleaved16.
Nvfp4Tensor interleave_nvfp4_tensor(const Nvfp4Tensor& w);

}  // namespace nvfp4lm::cpu
