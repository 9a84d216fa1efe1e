// CPU "cpu/dequant-gemm" NVFP4 linear (see ops/nvfp4_linear.h):
//  - many rows (prefill, training-size batches): dequantize the weight into the F32 scratch, then OpenBLAS sgemm;
//    the dequantization is amortised over the rows. A scratch smaller than the weight is used in blocks of
//    output rows (one sgemm per block, writing a column block of y).
//  - few rows (decode): threads split the output features; each dequantizes its weight rows one at a time into a
//    private buffer that stays in L1 and takes the dot products with the (few) x rows right away. Memory traffic
//    is then the packed weight only, which is what makes NVFP4 decoding faster than a dense F32 model.
// Weight values are e2m1_to_float(code) * nvfp4_dequant_scale(scale, tensor_scale), the products every
// dequantization uses, so the two paths differ only in fp32 summation order.
#include "ops/cpu/nvfp4_linear.h"

#include <algorithm>
#include <vector>

#include "ops/cpu/gemm.h"
#include "ops/cpu/simd.h"
#include "ops/cpu/views.h"
#include "ops/nvfp4_linear.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::cpu {
namespace {

// Below this many weight elements (~0.5 MB packed, ~0.3 ms of work) the fused path runs on one thread: a decode
// step makes 7 such calls per layer, and on a busy machine each parallel region's barrier can cost a scheduler
// time slice, far more than the work it splits.
constexpr int64_t kParallelElements = int64_t{1} << 20;

// One weight row: cols / 16 blocks of 8 packed bytes and one scale byte each. e2m1_to_float is bit arithmetic
// (no table), so the inner loop vectorizes (variable shifts pick the nibbles).
inline void dequantize_row(const uint8_t* codes, const uint8_t* scales, int64_t cols, float tensor_scale, float* out) {
  for (int64_t b = 0; b < cols / kNvfp4BlockSize; ++b) {
    const float denominator = nvfp4_dequant_scale(scales[b], tensor_scale);
    const uint8_t* packed = codes + b * (kNvfp4BlockSize / 2);
    float* target = out + b * kNvfp4BlockSize;
#pragma omp simd
    for (int i = 0; i < kNvfp4BlockSize; ++i) {
      const auto code = static_cast<uint8_t>((packed[i >> 1] >> ((i & 1) * 4)) & 0xF);
      target[i] = e2m1_to_float(code) * denominator;
    }
  }
}

// Dot product with 16 independent lane sums (vectorizes without reassociation flags; fixed order).
inline float dot(const float* a, const float* b, int64_t n) {
  float lanes[kNvfp4BlockSize] = {};
  for (int64_t k = 0; k < n; k += kNvfp4BlockSize) {
#pragma omp simd
    for (int i = 0; i < kNvfp4BlockSize; ++i) lanes[i] += a[k + i] * b[k + i];
  }
  float sum = 0.f;
  for (float lane : lanes) sum += lane;
  return sum;
}

NVFP4LM_CPU_CLONES void fused_rows(const MatrixF32& x, const uint8_t* codes, const uint8_t* scales, int64_t rows,
                                   int64_t cols, float tensor_scale, const MatrixF32& y) {
  const int64_t n_rows = x.rows;
#pragma omp parallel if (rows * cols >= kParallelElements)
  {
    std::vector<float> weight_row(static_cast<size_t>(cols));
    float* w = weight_row.data();
#pragma omp for schedule(static)
    for (int64_t o = 0; o < rows; ++o) {
      dequantize_row(codes + o * (cols / 2), scales + o * (cols / kNvfp4BlockSize), cols, tensor_scale, w);
      for (int64_t n = 0; n < n_rows; ++n) y.row(n)[o] = dot(x.row(n), w, cols);
    }
  }
}

}  // namespace

void nvfp4_linear_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& y, Tensor& scratch) {
  const MatrixF32 mx = as_matrix(x, "nvfp4_linear x");
  const MatrixF32 my = as_matrix(y, "nvfp4_linear y");
  NVFP4LM_ASSERT(w.codes.is_contiguous() && w.block_scales.is_contiguous() && w.block_scales.dtype() == DType::E4M3,
                 "nvfp4_linear: codes {} / block scales {} must be contiguous (E2M1x2 or U8, E4M3)", w.codes.str(),
                 w.block_scales.str());
  if (mx.rows == 0) return;
  const auto* codes = static_cast<const uint8_t*>(w.codes.raw());
  const auto* scales = static_cast<const uint8_t*>(w.block_scales.raw());
  if (mx.rows <= kNvfp4FusedMaxRows) {
    fused_rows(mx, codes, scales, w.rows, w.cols, w.tensor_scale, my);
    return;
  }
  NVFP4LM_ASSERT(scratch.dtype() == DType::F32, "nvfp4_linear: the CPU scratch must be F32, got {}", scratch.str());
  const int64_t block_rows = std::min(w.rows, scratch.numel() / w.cols);
  const Tensor flat_scratch = scratch.reshape({scratch.numel()});
  for (int64_t first = 0; first < w.rows; first += block_rows) {
    const int64_t count = std::min(block_rows, w.rows - first);
    Nvfp4Tensor part = w;
    if (count < w.rows) {
      part.codes = w.codes.narrow(0, first, count);
      part.block_scales = w.block_scales.narrow(0, first, count);
      part.rows = count;
    }
    Tensor dense = flat_scratch.narrow(0, 0, count * w.cols).reshape({count, w.cols});
    dequantize_nvfp4(part, dense);
    Tensor y_part = count < w.rows ? y.narrow(1, first, count) : y;
    gemm(x, false, dense, true, y_part, 1.f, 0.f);
  }
}

}  // namespace nvfp4lm::cpu
