// See bf16_linear.h.
#include "ops/cpu/bf16_linear.h"

#include <algorithm>

#include "core/numeric.h"
#include "ops/cpu/bf16_dot.h"
#include "ops/cpu/bf16_gemm.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/row_groups.h"
#include "ops/cpu/views.h"

namespace nvfp4lm::cpu {
namespace {

// Fp32 mode, many rows: weight rows widened to fp32 per sgemm (a 151,936-row lm_head in ~150 blocks of 10 MB).
constexpr int64_t kFp32BlockRows = 1024;

void dot_rows(const MatrixF32& x, const Bf16Rows& w, int64_t out, const MatrixF32& y) {
  const Bf16DotFamily::Variant& variant = bf16_dot_family().chosen();
  run_row_groups(x, y, out, w.cols, w.cols * 2,
                 [&](int64_t first, int64_t last, const float* const* x_rows, float* const* y_rows, int n) {
                   bf16_dot_rows(variant, w, first, last, x_rows, y_rows, n);
                 });
}

void fp32_blocks(const Tensor& x, const uint16_t* bits, int64_t out, int64_t in, Tensor& y) {
  const int64_t block_rows = std::min(kFp32BlockRows, out);
  Tensor block = Tensor::empty({block_rows, in}, DType::F32);
  float* widened = block.data<float>();
  for (int64_t first = 0; first < out; first += block_rows) {
    const int64_t count = std::min(block_rows, out - first);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count * in; ++i) widened[i] = bf16_to_float(bits[first * in + i]);
    const Tensor weights = block.narrow(0, 0, count);
    Tensor y_part = count < out ? y.narrow(1, first, count) : y;
    cpu::gemm(x, false, weights, true, y_part, 1.f, 0.f);
  }
}

void bf16_blocks(const MatrixF32& x, const uint16_t* bits, int64_t out, const MatrixF32& y) {
  // The calling thread's buffer, reused across calls. The parallel region below must read it through this reference:
  // naming the thread_local there would give each worker its own (empty) one.
  static thread_local PackedActivations packed_storage;
  PackedActivations& packed = packed_storage;
  pack_activations(x.data, x.ld, x.rows, x.cols, packed);
  const Bf16GemmFamily::Variant& variant = bf16_gemm_family().chosen();
  const int64_t tiles = (out + kBf16GemmTileRows - 1) / kBf16GemmTileRows;
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t first = tile * kBf16GemmTileRows;
    bf16_gemm(variant, packed, bits + first * x.cols, x.cols, std::min(kBf16GemmTileRows, out - first), 1.0f,
              y.data + first, y.ld);
  }
}

}  // namespace

void bf16_linear_forward(const Tensor& x, const Tensor& w, Tensor& y, bool independent_rows, CpuMatmul matmul) {
  NVFP4LM_ASSERT(w.dtype() == DType::BF16 && w.rank() == 2 && w.is_contiguous() && w.device().is_cpu(),
                 "bf16_linear_forward: weight {} must be a contiguous BF16 CPU matrix", w.str());
  const MatrixF32 mx = as_matrix(x, "bf16_linear x");
  const MatrixF32 my = as_matrix(y, "bf16_linear y");
  const int64_t out = w.dim(0), in = w.dim(1);
  NVFP4LM_ASSERT(mx.cols == in && my.cols == out && mx.rows == my.rows, "bf16_linear_forward: x {} · {}ᵀ -> y {}",
                 x.str(), w.str(), y.str());
  if (mx.rows == 0) return;
  const auto* bits = static_cast<const uint16_t*>(w.raw());
  if (mx.rows <= kDotMaxRows || independent_rows) return dot_rows(mx, Bf16Rows{bits, in, in}, out, my);
  // An odd width cannot be packed in pairs: it takes the reference's route (Qwen3's hidden sizes are even).
  if (matmul != CpuMatmul::Fp32 && in % 2 == 0) return bf16_blocks(mx, bits, out, my);
  fp32_blocks(x, bits, out, in, y);
}

}  // namespace nvfp4lm::cpu
