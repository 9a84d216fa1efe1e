// CUDA twin of ops/nvfp4_linear.h, raw-pointer launchers (no Tensor, no fmt): ops/nvfp4_linear.cpp checks the
// operands and picks the path.
//  - "cuda/nvfp4-w4a16" fused GEMV / skinny GEMM for the few rows of a decode step (N <= kNvfp4FusedMaxRows):
//    the weight stays packed (0.5625 bytes per weight incl. scales cross the memory bus), codes are decoded
//    and block-scaled in registers into BF16 tensor-core fragments (mma.sync m16n8k16, the N rows of x as the
//    8 columns), fp32 accumulation. Shape contract: in % 32 == 0, codes / scales contiguous, codes, x rows and
//    x's row stride 16-byte aligned (nvfp4_gemv_supported says whether a problem qualifies).
//  - for more rows the dispatcher dequantizes into a BF16 scratch (quant/cuda/nvfp4.cu) and calls the public
//    gemm (cuBLASLt).
// The seam for Blackwell: a native FP4 tensor-core GEMM (tcgen05 / mma with block scales, W4A4 with the
// activations quantized on the fly, or W4A16 via FP4 -> FP8 staging) would be a third launcher here with its
// own *_supported check, chosen by ops/nvfp4_linear.cpp before the two above; the packed layout (codes
// [out, in/2], E4M3 scales [out, in/16], fp32 tensor scale) is the one those kernels consume, swizzled per their
// scale-factor layout at load time.
#pragma once

#include <cstdint>

namespace nvfp4lm::cuda {

// Whether nvfp4_gemv can run this problem (see the shape contract above); n_rows <= 8.
bool nvfp4_gemv_supported(const void* x, int64_t x_row_stride, const void* codes, int64_t n_rows, int64_t in_features);

// y [n_rows, out] (BF16, row stride y_row_stride elements) = x [n_rows, in] (BF16, row stride x_row_stride)
// · deq(w)ᵀ, where w = codes [out, in/2] (two E2M1 per byte, low nibble first), scales [out, in/16] (E4M3),
// tensor_scale: value = code * e4m3(scale) * tensor_scale.
void nvfp4_gemv(const void* x, int64_t x_row_stride, const uint8_t* codes, const uint8_t* scales, float tensor_scale,
                int64_t n_rows, int64_t out_features, int64_t in_features, void* y, int64_t y_row_stride);

}  // namespace nvfp4lm::cuda
