// CPU y [N, out] = x [N, in] · wᵀ for a BF16 weight [out, in] (the inference model's embedding used as lm_head, or
// an untied BF16 lm_head), F32 x and y, in either CpuMatmul mode (ops/cpu_matmul.h): few rows, or any number with
// independent_rows (LinearRows::Independent), through the BF16 dot-product kernel (ops/cpu/bf16_dot.h,
// ops/cpu/row_groups.h); many rows through sgemm on fp32 blocks of the weight (Fp32) or the BF16 GEMM
// (Bf16Activations, ops/cpu/bf16_gemm.h).
#pragma once

#include "core/tensor.h"
#include "ops/cpu_matmul.h"

namespace nvfp4lm::cpu {

void bf16_linear_forward(const Tensor& x, const Tensor& w, Tensor& y, bool independent_rows, CpuMatmul matmul);

}  // namespace nvfp4lm::cpu
