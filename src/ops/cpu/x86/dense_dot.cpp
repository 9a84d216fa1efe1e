// See ../dense_dot.h: its AVX2 + FMA and AVX-512F variants (the portable one is in ../dense_dot.cpp).
#include "ops/cpu/x86/kernels.h"

#if NVFP4LM_X86_INTRINSICS

#include "ops/cpu/x86/simd.h"

namespace nvfp4lm::cpu::x86 {
namespace {

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

}  // namespace

RowKernels<DenseDotFn> dense_dot_avx2() {
  return row_kernels<DenseDotFn>([]<int N>() { return &dense_avx2<N>; });
}
RowKernels<DenseDotFn> dense_dot_avx512() {
  return row_kernels<DenseDotFn>([]<int N>() { return &dense_avx512<N>; });
}

}  // namespace nvfp4lm::cpu::x86
#endif  // NVFP4LM_X86_INTRINSICS
