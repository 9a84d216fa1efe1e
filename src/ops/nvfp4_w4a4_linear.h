// The W4A4 linear with both operands NVFP4: y [N, out] = deq(x) [N, in] · deq(w)ᵀ, deq = code * e4m3 block scale *
// tensor scale (quant/nvfp4.h). x is the activations, quantized by the caller with quantize_nvfp4 (1x16 blocks, the
// rule `--qat w4a4` and calibrated exports use); w the weight, Rows layout, 1x16 blocks.
// Compute paths:
//  - CPU, "cpu/nvfp4-w4a4-dequant" (the reference): both dequantized to F32 with dequantize_nvfp4's values, sgemm;
//    y F32.
//  - CUDA, "cuda/nvfp4-mma-fp4" on Blackwell SM 12.x (sm_120a / sm_121a images: the DGX Spark's GB10, RTX PRO):
//    the block-scaled FP4 tensor-core GEMM of ops/cuda/nvfp4_w4a4_gemm.h, fp32 accumulation, y BF16. It computes
//    every product code_x * s_x * code_w * s_w exactly and applies the two tensor scales to the fp32 sums, where the
//    fake-quantized BF16 GEMM it replaces rounds each operand to BF16 first: the two differ by at most
//    (2u + u²) Σ_k |deq(x)_k deq(w)_k| (u = 2^-8, BF16's unit roundoff) plus both sides' fp32 summation and the
//    final BF16 rounding (tests/ops/cuda/test_nvfp4_w4a4_cuda.cpp checks this bound).
//  - CUDA, "cuda/nvfp4-cublaslt-fp4" on Blackwell data-center GPUs (compute capability 10.x: B200, GB200, B300;
//    sm_100a has no warp-level FP4 mma): cuBLASLt's block-scaled FP4 matmul (ops/cuda/nvfp4_w4a4_cublaslt.h), the
//    block scales of both operands laid out as cuBLASLt reads them at each call, fp32 accumulation, y BF16; the same
//    exact products, summed in cuBLASLt's order. k must be a multiple of 32 there.
//  - other CUDA GPUs: not available (an Error naming why: nvfp4_w4a4_native says it beforehand); callers keep the
//    fake-quantized BF16 GEMM there.
#pragma once

#include <string>
#include <string_view>

#include "core/tensor.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

inline constexpr const char* kNvfp4W4a4CudaPath = "cuda/nvfp4-mma-fp4";
inline constexpr const char* kNvfp4W4a4CublasLtPath = "cuda/nvfp4-cublaslt-fp4";
inline constexpr const char* kNvfp4W4a4CpuPath = "cpu/nvfp4-w4a4-dequant";

// Whether W4A4 linears on `device` run natively (the CPU always does, as its reference); when not, `why_not` says why
// (e.g. "the GPU is not Blackwell SM 12.x ...; ... 10.x ...").
bool nvfp4_w4a4_native(Device device, std::string* why_not = nullptr);
// Whether one CUDA path (kNvfp4W4a4CudaPath or kNvfp4W4a4CublasLtPath) runs on `device`, and why not (diagnose
// lists each).
bool nvfp4_w4a4_path_available(Device device, std::string_view path, std::string* why_not = nullptr);
// The path nvfp4_w4a4_linear_forward takes on `device` (one of the three above); Error naming why when none.
const char* nvfp4_w4a4_compute_path(Device device);

// x: [N, in] NVFP4 (Rows layout), w: [out, in] NVFP4 (Rows layout), y: [N, out] allocated by the caller (F32 on the
// CPU, BF16 on CUDA; a row-strided view is fine), all on one device. in must be a multiple of 16.
void nvfp4_w4a4_linear_forward(const Nvfp4Tensor& x, const Nvfp4Tensor& w, Tensor& y);

}  // namespace nvfp4lm
