// See ../bf16_dot.h: its AVX2 + FMA and AVX-512F variants (the portable one is in ../bf16_dot.cpp).
#include "ops/cpu/x86/kernels.h"

#if NVFP4LM_X86_INTRINSICS
#include "core/numeric.h"
#include "ops/cpu/x86/simd.h"

namespace nvfp4lm::cpu::x86 {
namespace {

template <int N>
__attribute__((target("avx2,fma"))) void bf16_dot_rows_avx2(const Bf16Rows& w, int64_t first, int64_t last,
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
__attribute__((target("avx512f"))) void bf16_dot_rows_avx512(const Bf16Rows& w, int64_t first, int64_t last,
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

}  // namespace

RowKernels<Bf16DotFn> bf16_dot_avx2() {
  return row_kernels<Bf16DotFn>([]<int N>() { return &bf16_dot_rows_avx2<N>; });
}
RowKernels<Bf16DotFn> bf16_dot_avx512() {
  return row_kernels<Bf16DotFn>([]<int N>() { return &bf16_dot_rows_avx512<N>; });
}

}  // namespace nvfp4lm::cpu::x86
#endif  // NVFP4LM_X86_INTRINSICS
