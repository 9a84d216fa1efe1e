// CPU NVFP4 linear (see ops/nvfp4_linear.h), "cpu/dequant-gemm" and "cpu/nvfp4-bf16":
//  - many rows (prefill, training-size batches): dequantize the weight into the F32 scratch, then OpenBLAS sgemm;
//    the dequantization is amortised over the rows. A scratch smaller than the weight is used in blocks of
//    output rows (one sgemm per block, writing a column block of y).
//  - few rows (decode), or any number with independent_rows: threads split the output features; each takes the dot
//    products of its weight rows with the x rows straight from the packed codes (ops/cpu/nvfp4_dot.h, SIMD per
//    CPU; ops/cpu/row_groups.h for more than 8 rows). Memory traffic is then the packed weight only, which is what
//    makes NVFP4 decoding faster than a dense F32 model, and each row's result does not depend on the others.
//  - few rows with CpuMatmul::Int8Activations: the same split, each x row quantized once to int8 (a scale per 16
//    values) and multiplied by the codes in integer dot products (ops/cpu/nvfp4_int8_dot.h).
//  - many rows with CpuMatmul::Bf16Activations or Int8Activations: each thread dequantizes 6 weight rows at a time to
//  BF16 (exact) and
//    runs the BF16 GEMM over every activation row (ops/cpu/bf16_gemm.h); the tensor scale multiplies the sums.
// Weight values are e2m1_to_float(code) * nvfp4_dequant_scale(scale, tensor_scale), the products every
// dequantization uses, so the two fp32 paths differ only in fp32 summation order.
#include "ops/cpu/nvfp4_linear.h"

#include <algorithm>
#include <vector>

#include "ops/cpu/bf16_gemm.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/nvfp4_dot.h"
#include "ops/cpu/nvfp4_int8_dot.h"
#include "ops/cpu/row_groups.h"
#include "ops/cpu/views.h"
#include "ops/nvfp4_linear.h"

namespace nvfp4lm::cpu {
namespace {

void bf16_rows(const MatrixF32& x, const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
               float tensor_scale, const MatrixF32& y) {
  // The calling thread's buffer, reused across calls. The parallel region below must read it through this reference:
  // naming the thread_local there would give each worker its own (empty) one.
  static thread_local PackedActivations packed_storage;
  PackedActivations& packed = packed_storage;
  pack_activations(x.data, x.ld, x.rows, x.cols, packed);
  const Bf16Isa isa = best_bf16_isa();
  const int64_t tiles = (rows + kBf16GemmTileRows - 1) / kBf16GemmTileRows;
#pragma omp parallel
  {
    static thread_local std::vector<uint16_t> weights;
    weights.resize(static_cast<size_t>(kBf16GemmTileRows * cols));
#pragma omp for schedule(dynamic, 2)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t first = tile * kBf16GemmTileRows;
      const int64_t count = std::min(kBf16GemmTileRows, rows - first);
      for (int64_t r = 0; r < count; ++r)
        dequantize_nvfp4_row_bf16(isa, codes + (first + r) * (cols / 2), scales + (first + r) * (cols / 16), cols,
                                  weights.data() + r * cols);
      bf16_gemm(isa, packed, weights.data(), cols, count, tensor_scale, y.data + first, y.ld);
    }
  }
}

void int8_rows(const MatrixF32& x, const Nvfp4Rows& w, int64_t out_rows, const MatrixF32& y) {
  const std::vector<Int8Activations>& quantized = quantize_int8_rows(x);
  const DotIsa isa = best_int8_dot_isa();
  run_row_groups_of(
      x.rows, [&](int64_t i) -> const Int8Activations* { return &quantized[static_cast<size_t>(i)]; }, y, out_rows,
      w.cols, w.cols / 2 + w.cols / 16,
      [&](int64_t first, int64_t last, const Int8Activations* const* x_rows, float* const* y_rows, int n) {
        nvfp4_int8_dot_rows(isa, w, first, last, x_rows, y_rows, n);
      });
}

}  // namespace

void nvfp4_linear_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& y, Tensor& scratch, bool independent_rows,
                          CpuMatmul matmul) {
  const MatrixF32 mx = as_matrix(x, "nvfp4_linear x");
  const MatrixF32 my = as_matrix(y, "nvfp4_linear y");
  NVFP4LM_ASSERT(w.codes.is_contiguous() && w.block_scales.is_contiguous() && w.block_scales.dtype() == DType::E4M3,
                 "nvfp4_linear: codes {} / block scales {} must be contiguous (E2M1x2 or U8, E4M3)", w.codes.str(),
                 w.block_scales.str());
  if (mx.rows == 0) return;
  const auto* codes = static_cast<const uint8_t*>(w.codes.raw());
  const auto* scales = static_cast<const uint8_t*>(w.block_scales.raw());
  if ((mx.rows <= kNvfp4FusedMaxRows || independent_rows) && matmul == CpuMatmul::Int8Activations) {
    int8_rows(mx, Nvfp4Rows{codes, scales, w.cols, w.tensor_scale}, w.rows, my);
    return;
  }
  if (mx.rows <= kNvfp4FusedMaxRows || independent_rows) {
    const Nvfp4Rows rows{codes, scales, w.cols, w.tensor_scale};
    const DotIsa isa = best_nvfp4_dot_isa();
    run_row_groups(mx, my, w.rows, w.cols, w.cols / 2 + w.cols / 16,
                   [&](int64_t first, int64_t last, const float* const* x_rows, float* const* y_rows, int n) {
                     nvfp4_dot_rows(isa, rows, first, last, x_rows, y_rows, n);
                   });
    return;
  }
  if (matmul != CpuMatmul::Fp32) {
    bf16_rows(mx, codes, scales, w.rows, w.cols, w.tensor_scale, my);
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
