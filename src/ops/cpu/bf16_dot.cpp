// See bf16_dot.h. n (1..8) is a template parameter so the per-row sums stay in registers; a BF16 becomes fp32 by
// moving its bits to the top half of a 32-bit lane.
#include "ops/cpu/bf16_dot.h"

#include "core/error.h"
#include "core/numeric.h"
#include "ops/cpu/nvfp4_dot.h"
#include "ops/cpu/simd.h"

namespace nvfp4lm::cpu {
namespace {

template <int N>
void rows_scalar(const Bf16Rows& w, int64_t first, int64_t last, const float* const* x, float* const* y) {
  constexpr int kLanes = 16;
  for (int64_t o = first; o < last; ++o) {
    const uint16_t* row = w.data + o * w.ld;
    float lanes[N][kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= w.cols; k += kLanes) {
      for (int r = 0; r < N; ++r)
        for (int i = 0; i < kLanes; ++i) lanes[r][i] += bf16_to_float(row[k + i]) * x[r][k + i];
    }
    for (int r = 0; r < N; ++r) {
      float sum = 0;
      for (float lane : lanes[r]) sum += lane;
      for (int64_t kk = k; kk < w.cols; ++kk) sum += bf16_to_float(row[kk]) * x[r][kk];
      y[r][o] = sum;
    }
  }
}

#if NVFP4LM_X86_INTRINSICS
#pragma GCC diagnostic push
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC PR 105593, see nvfp4_dot.cpp
#endif
template <int N>
__attribute__((target("avx2,fma"))) void rows_avx2(const Bf16Rows& w, int64_t first, int64_t last,
                                                   const float* const* x, float* const* y) {
  for (int64_t o = first; o < last; ++o) {
    const uint16_t* row = w.data + o * w.ld;
    __m256 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= w.cols; k += 8) {
      const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k));
      const __m256 weights = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
      for (int r = 0; r < N; ++r) acc[r] = _mm256_fmadd_ps(weights, _mm256_loadu_ps(x[r] + k), acc[r]);
    }
    for (int r = 0; r < N; ++r) {
      float sum = avx2_lane_sum(acc[r]);
      for (int64_t kk = k; kk < w.cols; ++kk) sum += bf16_to_float(row[kk]) * x[r][kk];
      y[r][o] = sum;
    }
  }
}

template <int N>
__attribute__((target("avx512f"))) void rows_avx512(const Bf16Rows& w, int64_t first, int64_t last,
                                                    const float* const* x, float* const* y) {
  for (int64_t o = first; o < last; ++o) {
    const uint16_t* row = w.data + o * w.ld;
    __m512 acc[N], acc2[N];
    for (int r = 0; r < N; ++r) acc[r] = acc2[r] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= w.cols; k += 32) {  // 64 bytes of weights, two independent sums per row
      const __m512i bits = _mm512_loadu_si512(row + k);
      const __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(bits)), 16));
      const __m512 w1 =
          _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(bits, 1)), 16));
      for (int r = 0; r < N; ++r) {
        acc[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[r] + k), acc[r]);
        acc2[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x[r] + k + 16), acc2[r]);
      }
    }
    for (int r = 0; r < N; ++r) {
      float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc[r], acc2[r]));
      for (int64_t kk = k; kk < w.cols; ++kk) sum += bf16_to_float(row[kk]) * x[r][kk];
      y[r][o] = sum;
    }
  }
}
#pragma GCC diagnostic pop
#endif

using RowsFn = void (*)(const Bf16Rows&, int64_t, int64_t, const float* const*, float* const*);

template <int N>
struct Kernels {
#if NVFP4LM_X86_INTRINSICS
  static constexpr RowsFn scalar = rows_scalar<N>, avx2 = rows_avx2<N>, avx512 = rows_avx512<N>;
#else
  static constexpr RowsFn scalar = rows_scalar<N>, avx2 = scalar, avx512 = scalar;
#endif
};

// The dot kernels keep the activations in fp32, so avx512bf16 runs the avx512f code.
DotIsa dot_isa_of(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::Avx2:
      return DotIsa::Avx2;
    case Bf16Isa::Avx512:
    case Bf16Isa::Avx512Bf16:
      return DotIsa::Avx512;
    case Bf16Isa::Scalar:
      break;
  }
  return DotIsa::Scalar;
}

}  // namespace

void bf16_dot_rows(Bf16Isa isa, const Bf16Rows& w, int64_t first, int64_t last, const float* const* x_rows,
                   float* const* y_rows, int n) {
  NVFP4LM_ASSERT(n >= 1 && n <= kDotMaxRows, "bf16_dot_rows: {} activation rows (1..{})", n, kDotMaxRows);
  NVFP4LM_ASSERT(bf16_isa_supported(isa), "bf16_dot_rows: this CPU cannot run the {} variant", bf16_isa_name(isa));
  if (first >= last) return;
  pick_dot_kernel<RowsFn, Kernels>(dot_isa_of(isa), n)(w, first, last, x_rows, y_rows);
}

}  // namespace nvfp4lm::cpu
