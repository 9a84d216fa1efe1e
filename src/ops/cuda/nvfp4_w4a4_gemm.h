// "cuda/nvfp4-mma-fp4": the native NVFP4 x NVFP4 GEMM of Blackwell SM 12.x (RTX PRO / RTX 50 = sm_120a, DGX Spark's
// GB10 = sm_121a), raw-pointer launcher (no Tensor, no fmt): ops/nvfp4_linear.cpp checks the operands and chooses it.
//
//   y[m][n] = bf16( alpha · Σ_k (x_code[m][k] · x_scale[m][k/16]) · (w_code[n][k] · w_scale[n][k/16]) )
//
// Both operands as NVFP4 stores them (quant/nvfp4.h, Rows layout): codes [rows, k/2] (element 2i in the low nibble),
// E4M3 block scales [rows, k/16] (one per 16 values of a row), an fp32 tensor scale each, folded into alpha =
// x.tensor_scale * w.tensor_scale. x is the activations (W4A4: quantized on the fly with the CPU reference's rule,
// quant/nvfp4_block.h), w the weight [out_features, k]: y = x · wᵀ, as every linear here.
//
// The products run on the tensor cores' block-scaled FP4 mma.sync (m16n8k64, kind::mxf4nvf4, scale_vec::4X,
// ue4m3 scales: ops/cuda/ptx.h mma_fp4), fp32 accumulation. Summation order of one output: one mma per 64 values of
// k, in increasing k, each adding its 64 exact products to the running fp32 sum (inside an mma the order is the
// hardware's: unspecified by the PTX ISA; the emulated device sums them exactly and rounds once). It depends on k
// only, not on the row's batch or place, so a sequence's logits do not depend on its neighbours beyond what the
// hardware's in-mma order does.
//
// Only an sm_120a / sm_121a image has the instruction: nvfp4_w4a4_gemm_available() asks the device (its compute
// capability is 12.x and the loaded image was compiled with the instruction); elsewhere the kernel would trap.
#pragma once

#include <cstdint>

namespace nvfp4lm::cuda {

struct Nvfp4Operand {
  const uint8_t* codes = nullptr;   // [rows, k/2]
  const uint8_t* scales = nullptr;  // [rows, k/16] E4M3 (positive: the MSB clear, as the mma's ue4m3 needs)
  int64_t rows = 0;
};

struct Nvfp4W4a4Gemm {
  Nvfp4Operand x;  // [m, k]: the activations
  Nvfp4Operand w;  // [n, k]: the weight
  int64_t k = 0;   // a multiple of 16
  float alpha = 1.f;
  void* y = nullptr;  // [m, n] BF16, row stride y_row_stride (elements)
  int64_t y_row_stride = 0;
};

// Whether this process's GPU runs the kernel: compute capability 12.x and an image with the FP4 mma loaded (asked
// once per device with a probe kernel). `why_not` (optional) gets the reason when it does not.
bool nvfp4_w4a4_gemm_available(const char** why_not = nullptr);

// Whether the problem's shape qualifies: k a positive multiple of 16, codes 4-byte aligned, rows >= 0.
bool nvfp4_w4a4_gemm_supported(const Nvfp4W4a4Gemm& problem);

// On cuda::stream(); the caller checked both of the above.
void nvfp4_w4a4_gemm(const Nvfp4W4a4Gemm& problem);

}  // namespace nvfp4lm::cuda
