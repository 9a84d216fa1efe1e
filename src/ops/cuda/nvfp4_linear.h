// CUDA twin of ops/nvfp4_linear.h, raw-pointer launchers (no Tensor, no fmt): ops/nvfp4_linear.cpp checks the
// operands and picks the path.
//  - "cuda/nvfp4-w4a16" fused GEMV / skinny GEMM for the few rows of a decode step (N <= kNvfp4GemvMaxRows):
//    the weight stays packed (0.5625 bytes per weight incl. scales cross the memory bus), codes are decoded
//    and block-scaled in registers into BF16 tensor-core fragments (mma.sync m16n8k16, the N rows of x as the
//    columns of 1, 2 or 4 column tiles), fp32 accumulation. Each row of x is computed as if it were alone (its
//    column's sums do not depend on the others), so a batch gives every sequence the logits it gets by itself.
//    Shape contract: in % 32 == 0, codes / scales contiguous, codes, x rows and x's row stride 16-byte aligned
//    (nvfp4_gemv_supported says whether a problem qualifies).
//    One launch also does what a decode step would otherwise launch around it (Nvfp4GemvEpilogue): up to three
//    weights that read the same x (q, k, v), the residual add after o_proj / down_proj, and gate/up with the
//    SwiGLU after them. Each gives the bits of the op sequence it replaces (GEMV per weight, then add_inplace or
//    swiglu_forward on the BF16 products) on the emulated device; on a GPU, up to the tensor core's accumulation
//    order, which may differ with a row's place in the tile.
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

// Rows of x one fused launch takes (4 column tiles of 8); more rows run in groups of this many.
inline constexpr int64_t kNvfp4GemvMaxRows = 32;

// One weight of a fused launch and where its products go.
struct Nvfp4GemvWeight {
  const uint8_t* codes = nullptr;   // [rows, in/2], two E2M1 codes a byte, low nibble first
  const uint8_t* scales = nullptr;  // [rows, in/16] E4M3
  float tensor_scale = 1.f;         // value = code * e4m3(scale) * tensor_scale
  int64_t rows = 0;                 // output features
  void* y = nullptr;                // [n_rows, rows] BF16 (the epilogue's operand too), row stride y_row_stride
  int64_t y_row_stride = 0;
};

enum class Nvfp4GemvEpilogue {
  Store,        // y_i = x · w_iᵀ for each of the 1..3 weights
  AddResidual,  // y += x · wᵀ (one weight): the product rounded to BF16, then added and rounded, as add_inplace
  SwiGlu,  // weights[0] = gate, weights[1] = up (same shape): weights[0].y = silu(x · gateᵀ) * (x · upᵀ), each
           // product rounded to BF16 first, as swiglu_forward after two GEMVs; weights[1].y is not written
};

struct Nvfp4Gemv {
  const void* x = nullptr;  // [n_rows, in] BF16, row stride x_row_stride
  int64_t x_row_stride = 0;
  int64_t n_rows = 0;  // 1 .. kNvfp4GemvMaxRows
  int64_t in_features = 0;
  Nvfp4GemvWeight weights[3];
  int weight_count = 1;
  Nvfp4GemvEpilogue epilogue = Nvfp4GemvEpilogue::Store;
};

// Whether nvfp4_gemv can run `problem` (the shape contract above, and the epilogue's: one weight for
// AddResidual, two of one shape for SwiGlu).
bool nvfp4_gemv_supported(const Nvfp4Gemv& problem);

void nvfp4_gemv(const Nvfp4Gemv& problem);

}  // namespace nvfp4lm::cuda
