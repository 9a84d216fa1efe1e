// CPU NVFP4 linear (see ops/nvfp4_linear.h), "cpu/dequant-gemm" and "cpu/nvfp4-bf16":
//  - many rows (prefill, training-size batches): dequantize the weight into the F32 scratch, then OpenBLAS sgemm;
//    the dequantization is amortised over the rows. A scratch smaller than the weight is used in blocks of
//    output rows (one sgemm per block, writing a column block of y).
//  - few rows (decode), or any number of LinearRows::Independent rows (and Prefill rows in Fp32 mode): threads
//    split the output features; each takes the dot products of its weight rows with the x rows straight from the
//    packed codes (ops/cpu/nvfp4_dot.h, SIMD per CPU; ops/cpu/row_groups.h for more than 8 rows). Memory traffic
//    is then the packed weight only, which is what makes NVFP4 decoding faster than a dense F32 model, and each
//    row's result does not depend on the others.
//  - few rows with CpuMatmul::Int8Activations: the same split, each x row quantized once to int8 (a scale per 16
//    values) and multiplied by the codes in integer dot products (ops/cpu/nvfp4_int8_dot.h).
//  - many rows, or any number of LinearRows::Prefill rows, with CpuMatmul::Bf16Activations or Int8Activations: each
//    thread dequantizes 6 weight rows at a time to BF16 (exact) and runs the BF16 GEMM over every activation row
//    (ops/cpu/bf16_gemm.h, one lane per row: a row's sums do not depend on the others); the tensor scale multiplies
//    the sums.
// Weight values are e2m1_to_float(code) * nvfp4_dequant_scale(scale, tensor_scale), the products every
// dequantization uses, so the two fp32 paths differ only in fp32 summation order.
#include "ops/cpu/nvfp4_linear.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "ops/cpu/bf16_gemm.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/nvfp4_dot.h"
#include "ops/cpu/nvfp4_int8_dot.h"
#include "ops/cpu/nvfp4_interleaved.h"
#include "ops/cpu/row_groups.h"
#include "ops/cpu/views.h"
#include "ops/nvfp4_linear.h"

namespace nvfp4lm::cpu {
namespace {

// The prefill's BF16 products: tiles of `tile_rows` weight rows, each handed out by tile_of(first, count) as `count`
// rows of codes and scales in the row layout, dequantized to BF16 in cache and multiplied with every activation row.
template <typename TileOf>
void bf16_tiles(const MatrixF32& x, int64_t rows, int64_t cols, int64_t tile_rows, int tiles_per_grab,
                float tensor_scale, const MatrixF32& y, const TileOf& tile_of) {
  // The calling thread's buffer, reused across calls. The parallel region below must read it through this reference:
  // naming the thread_local there would give each worker its own (empty) one.
  static thread_local PackedActivations packed_storage;
  PackedActivations& packed = packed_storage;
  pack_activations(x.data, x.ld, x.rows, x.cols, packed);
  const Bf16GemmFamily::Variant& variant = bf16_gemm_family().chosen();
  const int64_t tiles = (rows + tile_rows - 1) / tile_rows;
#pragma omp parallel
  {
    static thread_local std::vector<uint16_t> weights;
    weights.resize(static_cast<size_t>(tile_rows * cols));
#pragma omp for schedule(dynamic, tiles_per_grab)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t first = tile * tile_rows;
      const int64_t count = std::min(tile_rows, rows - first);
      const auto [codes, scales] = tile_of(first, count);
      for (int64_t r = 0; r < count; ++r)
        dequantize_nvfp4_row_bf16(variant, codes + r * (cols / 2), scales + r * (cols / 16), cols,
                                  weights.data() + r * cols);
      bf16_gemm(variant, packed, weights.data(), cols, count, tensor_scale, y.data + first, y.ld);
    }
  }
}

using RowBytes = std::pair<const uint8_t*, const uint8_t*>;  // codes, scales of consecutive rows

void bf16_rows(const MatrixF32& x, const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
               float tensor_scale, const MatrixF32& y) {
  bf16_tiles(x, rows, cols, kBf16GemmTileRows, 2, tensor_scale, y, [&](int64_t first, int64_t) {
    return RowBytes{codes + first * (cols / 2), scales + first * (cols / 16)};
  });
}

void int8_rows(const MatrixF32& x, const Nvfp4Rows& w, int64_t out_rows, const MatrixF32& y) {
  const std::vector<Int8Activations>& quantized = quantize_int8_rows(x);
  const Int8DotFamily::Variant& variant = nvfp4_int8_dot_family().chosen();
  run_row_groups_of(
      x.rows, [&](int64_t i) -> const Int8Activations* { return &quantized[static_cast<size_t>(i)]; }, y, out_rows,
      w.cols, w.cols / 2 + w.cols / 16,
      [&](int64_t first, int64_t last, const Int8Activations* const* x_rows, float* const* y_rows, int n) {
        nvfp4_int8_dot_rows(variant, w, first, last, x_rows, y_rows, n);
      });
}

// Interleaved16 (ops/cpu/nvfp4_interleaved.h): the decode step's rows, split among threads by whole groups of 16
// output rows.
void interleaved_int8_rows(const MatrixF32& x, const Nvfp4Interleaved& w, const MatrixF32& y) {
  const std::vector<Int8BlockActivations>& quantized = quantize_int8_block_rows(x);
  const InterleavedDotFamily::Variant& variant = nvfp4_interleaved_family().chosen();
  run_row_groups_of(
      x.rows, [&](int64_t i) -> const Int8BlockActivations* { return &quantized[static_cast<size_t>(i)]; }, y,
      interleaved_groups(w.rows), kInterleaveRows* w.cols, kInterleaveRows*(w.cols / 2 + w.cols / 16),
      [&](int64_t first, int64_t last, const Int8BlockActivations* const* x_rows, float* const* y_rows, int n) {
        nvfp4_interleaved_int8_dot(variant, w, first, last, x_rows, y_rows, n);
      });
}

// Interleaved16, many rows (prefill): each group of 16 weight rows back in the row layout, in cache, then as
// bf16_rows (the same values and sums).
void interleaved_bf16_rows(const MatrixF32& x, const Nvfp4Interleaved& w, const MatrixF32& y) {
  const int64_t cols = w.cols;
  bf16_tiles(x, w.rows, cols, kInterleaveRows, 1, w.tensor_scale, y, [&](int64_t first, int64_t count) {
    static thread_local std::vector<uint8_t> codes, scales;
    codes.resize(static_cast<size_t>(kInterleaveRows * cols / 2));
    scales.resize(static_cast<size_t>(kInterleaveRows * cols / 16));
    deinterleave_nvfp4_group(w.data, cols, first / kInterleaveRows, count, codes.data(), scales.data());
    return RowBytes{codes.data(), scales.data()};
  });
}

}  // namespace

bool int8_decode_interleaves() { return !nvfp4_interleaved_family().chosen().isa->portable(); }

Nvfp4Tensor interleave_nvfp4_tensor(const Nvfp4Tensor& w) {
  NVFP4LM_ASSERT(
      w.layout == Nvfp4Layout::Rows && w.device().is_cpu() && w.codes.is_contiguous() && w.block_scales.is_contiguous(),
      "interleave_nvfp4_tensor: needs a contiguous row-layout CPU weight, got codes {}", w.codes.str());
  Nvfp4Tensor out = w;
  out.layout = Nvfp4Layout::Interleaved16;
  out.codes = Tensor::empty({interleaved_nvfp4_bytes(w.rows, w.cols)}, DType::U8, Device::cpu());
  out.block_scales = Tensor();
  interleave_nvfp4(static_cast<const uint8_t*>(w.codes.raw()), static_cast<const uint8_t*>(w.block_scales.raw()),
                   w.rows, w.cols, static_cast<uint8_t*>(out.codes.raw()));
  return out;
}

void nvfp4_linear_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& y, Tensor& scratch, LinearRows rows_kind,
                          CpuMatmul matmul) {
  const MatrixF32 mx = as_matrix(x, "nvfp4_linear x");
  const MatrixF32 my = as_matrix(y, "nvfp4_linear y");
  if (mx.rows == 0) return;
  // The decode kernels: always for Independent rows, and for few Batch rows. Prefill rows never take them in the
  // int8 / BF16 modes (their BF16 tiles give a row the same bits for any N); in Fp32 mode they do (sgemm is not
  // row-exact), so Fp32 prefill and decode share one kernel.
  const bool few = mx.rows <= kNvfp4FusedMaxRows && rows_kind == LinearRows::Batch;
  const bool use_dot_rows =
      rows_kind == LinearRows::Independent || few || (rows_kind == LinearRows::Prefill && matmul == CpuMatmul::Fp32);
  if (w.layout == Nvfp4Layout::Interleaved16) {
    NVFP4LM_ASSERT(matmul != CpuMatmul::Fp32,
                   "nvfp4_linear: an interleaved NVFP4 weight runs only the int8 / BF16 "
                   "paths (CpuMatmul::Fp32 needs the row layout)");
    const Nvfp4Interleaved interleaved{static_cast<const uint8_t*>(w.codes.raw()), w.rows, w.cols, w.tensor_scale};
    if (use_dot_rows)
      interleaved_int8_rows(mx, interleaved, my);
    else
      interleaved_bf16_rows(mx, interleaved, my);
    return;
  }
  NVFP4LM_ASSERT(w.codes.is_contiguous() && w.block_scales.is_contiguous() && w.block_scales.dtype() == DType::E4M3,
                 "nvfp4_linear: codes {} / block scales {} must be contiguous (E2M1x2 or U8, E4M3)", w.codes.str(),
                 w.block_scales.str());
  if (mx.rows == 0) return;
  const auto* codes = static_cast<const uint8_t*>(w.codes.raw());
  const auto* scales = static_cast<const uint8_t*>(w.block_scales.raw());
  if (use_dot_rows && matmul == CpuMatmul::Int8Activations) {
    int8_rows(mx, Nvfp4Rows{codes, scales, w.cols, w.tensor_scale}, w.rows, my);
    return;
  }
  if (use_dot_rows) {
    const Nvfp4Rows rows{codes, scales, w.cols, w.tensor_scale};
    const Nvfp4DotFamily::Variant& variant = nvfp4_dot_family().chosen();
    run_row_groups(mx, my, w.rows, w.cols, w.cols / 2 + w.cols / 16,
                   [&](int64_t first, int64_t last, const float* const* x_rows, float* const* y_rows, int n) {
                     nvfp4_dot_rows(variant, rows, first, last, x_rows, y_rows, n);
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
    cpu::gemm(x, false, dense, true, y_part, 1.f, 0.f);
  }
}

}  // namespace nvfp4lm::cpu
