// See dense_dot.h. Three variants of one loop nest, like nvfp4_dot.cpp: per weight row, per vector of columns,
// one load of the weight and a fused multiply-add into each of the n rows' accumulators (n is a template
// parameter so they live in registers); the last partial vector is masked; then each accumulator's lanes are
// summed. An accumulator only ever sees its own row, so its value does not depend on n.
#include "ops/cpu/dense_dot.h"

#include "core/error.h"
#include "ops/cpu/simd.h"

namespace nvfp4lm::cpu {
namespace {

// ---- scalar: 16 fixed lanes per row (the compiler vectorizes the lane loop) -------------------------------------
constexpr int kScalarLanes = 16;

template <int N>
void dense_scalar(const DenseRows& w, int64_t first, int64_t last, const float* const* x, float* const* y) {
  for (int64_t o = first; o < last; ++o) {
    const float* row = w.data + o * w.ld;
    float lanes[N][kScalarLanes] = {};
    for (int64_t k0 = 0; k0 < w.cols; k0 += kScalarLanes) {
      const int64_t count = w.cols - k0 < kScalarLanes ? w.cols - k0 : kScalarLanes;
      for (int r = 0; r < N; ++r)
        for (int64_t i = 0; i < count; ++i) lanes[r][i] += row[k0 + i] * x[r][k0 + i];
    }
    for (int r = 0; r < N; ++r) {
      float sum = 0.f;
      for (float lane : lanes[r]) sum += lane;
      y[r][o] = sum;
    }
  }
}

#if NVFP4LM_X86_INTRINSICS
#pragma GCC diagnostic push
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC PR 105593, see nvfp4_dot.cpp
#endif
// ---- AVX2 + FMA: 8 lanes, the tail through a load mask ----------------------------------------------------------
template <int N>
__attribute__((target("avx2,fma"))) void dense_avx2(const DenseRows& w, int64_t first, int64_t last,
                                                    const float* const* x, float* const* y) {
  const int64_t full = w.cols / 8 * 8;
  const int tail = static_cast<int>(w.cols - full);
  const __m256i tail_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int64_t o = first; o < last; ++o) {
    const float* row = w.data + o * w.ld;
    __m256 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t k = 0; k < full; k += 8) {
      const __m256 weight = _mm256_loadu_ps(row + k);
      for (int r = 0; r < N; ++r) acc[r] = _mm256_fmadd_ps(weight, _mm256_loadu_ps(x[r] + k), acc[r]);
    }
    if (tail > 0) {
      const __m256 weight = _mm256_maskload_ps(row + full, tail_mask);
      for (int r = 0; r < N; ++r) acc[r] = _mm256_fmadd_ps(weight, _mm256_maskload_ps(x[r] + full, tail_mask), acc[r]);
    }
    for (int r = 0; r < N; ++r) y[r][o] = avx2_lane_sum(acc[r]);
  }
}

// ---- AVX-512F: 16 lanes, the tail through a mask register -------------------------------------------------------
template <int N>
__attribute__((target("avx512f"))) void dense_avx512(const DenseRows& w, int64_t first, int64_t last,
                                                     const float* const* x, float* const* y) {
  const int64_t full = w.cols / 16 * 16;
  const auto tail = static_cast<__mmask16>((1u << (w.cols - full)) - 1u);
  for (int64_t o = first; o < last; ++o) {
    const float* row = w.data + o * w.ld;
    __m512 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < full; k += 16) {
      const __m512 weight = _mm512_loadu_ps(row + k);
      for (int r = 0; r < N; ++r) acc[r] = _mm512_fmadd_ps(weight, _mm512_loadu_ps(x[r] + k), acc[r]);
    }
    if (tail != 0) {
      const __m512 weight = _mm512_maskz_loadu_ps(tail, row + full);
      for (int r = 0; r < N; ++r) acc[r] = _mm512_fmadd_ps(weight, _mm512_maskz_loadu_ps(tail, x[r] + full), acc[r]);
    }
    for (int r = 0; r < N; ++r) y[r][o] = _mm512_reduce_add_ps(acc[r]);
  }
}
#pragma GCC diagnostic pop
#endif  // NVFP4LM_X86_INTRINSICS

using RowsFn = void (*)(const DenseRows&, int64_t, int64_t, const float* const*, float* const*);

template <int N>
struct Kernels {
#if NVFP4LM_X86_INTRINSICS
  static constexpr RowsFn scalar = dense_scalar<N>, avx2 = dense_avx2<N>, avx512 = dense_avx512<N>;
#else
  static constexpr RowsFn scalar = dense_scalar<N>, avx2 = scalar, avx512 = scalar;
#endif
};

}  // namespace

void dense_dot_rows(DotIsa isa, const DenseRows& w, int64_t first, int64_t last, const float* const* x_rows,
                    float* const* y_rows, int n) {
  NVFP4LM_ASSERT(n >= 1 && n <= kDotMaxRows, "dense_dot_rows: {} activation rows (1..{})", n, kDotMaxRows);
  NVFP4LM_ASSERT(w.cols >= 1 && w.ld >= w.cols, "dense_dot_rows: {} columns with leading dimension {}", w.cols, w.ld);
  NVFP4LM_ASSERT(dot_isa_supported(isa), "dense_dot_rows: this CPU cannot run the {} variant", dot_isa_name(isa));
  if (first >= last) return;
  pick_dot_kernel<RowsFn, Kernels>(isa, n)(w, first, last, x_rows, y_rows);
}

}  // namespace nvfp4lm::cpu
