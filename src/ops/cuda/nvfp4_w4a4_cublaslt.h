// "cuda/nvfp4-cublaslt-fp4": the NVFP4 x NVFP4 GEMM of Blackwell data-center GPUs (compute capability 10.x: B200,
// GB200, B300), through cuBLASLt's block-scaled FP4 matmul — SM 10.x has no warp-level FP4 mma.sync (its FP4 tensor
// cores are tcgen05's), so where SM 12.x runs ops/cuda/nvfp4_w4a4_gemm.h, SM 10.x asks cuBLASLt. Raw-pointer host
// code; ops/nvfp4_w4a4_linear.cpp checks the operands and chooses it.
//
//   y[m][n] = bf16( alpha · Σ_b sx[m][b] · sw[n][b] · Σ_{l<16} x_code[m][16b+l] · w_code[n][16b+l] ),  alpha = x.ts ·
//   w.ts
//
// The call (cuBLAS docs §3.1.4 "narrow precision", §3.4.17 cublasLtMatmul): CUDA_R_4F_E2M1 operands, both K-major
// ("TN": cuBLAS's A = w with transa = T, B = x with transb = N, so column-major D [N, M] is row-major y [M, N]),
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 on A and B with the scales laid out as ops/cuda/nvfp4_block_scale_layout.h
// says, CUBLAS_COMPUTE_32F with fp32 alpha (the two tensor scales) and beta 0, BF16 C = D. Element 2i of a row in the
// low nibble, as NVFP4 stores it (CUDA's __nv_fp4x2_e2m1 and NVIDIA's cuBLASLt samples pack it so). The summation
// order is cuBLASLt's (unspecified): a row's result does not depend on the rows beside it only as far as cuBLASLt's
// kernels guarantee that.
#pragma once

#include <cstdint>

#include "ops/cuda/nvfp4_w4a4_gemm.h"

namespace nvfp4lm::cuda {

// Whether this process's GPU runs it: compute capability 10.x and a cuBLASLt that has the block-scaled FP4 matmul
// (asked once per device with a heuristic query). `why_not` (optional, static storage) says why not.
bool nvfp4_w4a4_cublaslt_available(const char** why_not = nullptr);

// Whether the problem's shape qualifies: k a positive multiple of 32 and both operands' codes 16-byte aligned
// (cuBLASLt's FP4 kernels need 16-byte aligned rows), y 16-byte aligned with a row stride that is a multiple of 8.
bool nvfp4_w4a4_cublaslt_supported(const Nvfp4W4a4Gemm& problem);

// Bytes the laid-out block scales of a [rows, k] operand take (rows padded to 128, k/16 to 4).
int64_t nvfp4_cublaslt_scale_bytes(int64_t rows, int64_t k);
// Writes the [rows, k/16] row-major block scales in cuBLASLt's layout into `out` (nvfp4_cublaslt_scale_bytes bytes,
// 16-byte aligned; padding zero), on cuda::stream().
void nvfp4_lay_out_block_scales(const uint8_t* scales, int64_t rows, int64_t k, uint8_t* out);

// On cuda::stream(); the caller checked both of the above. x_scales / w_scales: the operands' scales laid out by
// nvfp4_lay_out_block_scales (problem.x.scales / w.scales are not read).
void nvfp4_w4a4_cublaslt_gemm(const Nvfp4W4a4Gemm& problem, const uint8_t* x_scales, const uint8_t* w_scales);

}  // namespace nvfp4lm::cuda
