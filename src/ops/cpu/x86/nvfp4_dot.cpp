// See ../nvfp4_dot.h: its AVX2 + FMA and AVX-512F variants (the portable one is in ../nvfp4_dot.cpp).
#include "ops/cpu/x86/kernels.h"

#if NVFP4LM_X86_INTRINSICS
#include <array>

#include "ops/cpu/x86/simd.h"

namespace nvfp4lm::cpu::x86 {
namespace {

// ---- AVX2 + FMA: 8 lanes; the 8 magnitudes by vpermps, the sign (code bit 3) moved to bit 31 and xored in -------
__attribute__((target("avx2,fma"))) inline __m256 avx2_values(__m128i codes8, __m256 magnitudes) {
  const __m256i index = _mm256_cvtepu8_epi32(codes8);
  const __m256 magnitude = _mm256_permutevar8x32_ps(magnitudes, index);  // low 3 bits pick
  const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(index, 28), _mm256_set1_epi32(INT32_MIN));
  return _mm256_xor_ps(magnitude, _mm256_castsi256_ps(sign));
}

template <int N>
__attribute__((target("avx2,fma"))) void nvfp4_dot_rows_avx2(const Nvfp4Rows& w, int64_t first, int64_t last,
                                                             const float* const* x, float* const* y) {
  const std::array<float, 256> multiplier = nvfp4_multiplier_table(w.tensor_scale);
  const std::array<float, 16> values = e2m1_value_table();
  const __m256 magnitudes = _mm256_loadu_ps(values.data());  // codes 0..7
  const __m128i low_nibbles = _mm_set1_epi8(0x0F);
  const int64_t blocks = w.cols / kNvfp4Block;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * (w.cols / 2);
    const uint8_t* scales = w.scales + o * blocks;
    __m256 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + b * (kNvfp4Block / 2)));
      const __m128i low = _mm_and_si128(packed, low_nibbles);
      const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), low_nibbles);
      const __m128i ordered = _mm_unpacklo_epi8(low, high);  // codes of elements 0..15 in order
      const __m256 m = _mm256_set1_ps(multiplier[scales[b]]);
      const __m256 w0 = _mm256_mul_ps(avx2_values(ordered, magnitudes), m);
      const __m256 w1 = _mm256_mul_ps(avx2_values(_mm_srli_si128(ordered, 8), magnitudes), m);
      for (int r = 0; r < N; ++r) {
        const float* xb = x[r] + b * kNvfp4Block;
        acc[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xb), acc[r]);
        acc[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xb + 8), acc[r]);
      }
    }
    for (int r = 0; r < N; ++r) y[r][o] = avx2_lane_sum(acc[r]);
  }
}

// ---- AVX-512F: 16 lanes = one block; the 16 signed values by one vpermps ----------------------------------------
template <int N>
__attribute__((target("avx512f"))) void nvfp4_dot_rows_avx512(const Nvfp4Rows& w, int64_t first, int64_t last,
                                                              const float* const* x, float* const* y) {
  const std::array<float, 256> multiplier = nvfp4_multiplier_table(w.tensor_scale);
  const std::array<float, 16> values = e2m1_value_table();
  const __m512 table = _mm512_loadu_ps(values.data());
  const __m128i low_nibbles = _mm_set1_epi8(0x0F);
  const int64_t blocks = w.cols / kNvfp4Block;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * (w.cols / 2);
    const uint8_t* scales = w.scales + o * blocks;
    __m512 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {  // two blocks from one 16-byte load
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + b * (kNvfp4Block / 2)));
      const __m128i low = _mm_and_si128(packed, low_nibbles);
      const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), low_nibbles);
      const __m512 w0 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(low, high)), table),
                                      _mm512_set1_ps(multiplier[scales[b]]));
      const __m512 w1 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(low, high)), table),
                                      _mm512_set1_ps(multiplier[scales[b + 1]]));
      for (int r = 0; r < N; ++r) {
        const float* xb = x[r] + b * kNvfp4Block;
        acc[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xb), acc[r]);
        acc[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xb + kNvfp4Block), acc[r]);
      }
    }
    if (b < blocks) {  // an odd last block
      const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + b * (kNvfp4Block / 2)));
      const __m128i low = _mm_and_si128(packed, low_nibbles);
      const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), low_nibbles);
      const __m512 w0 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(low, high)), table),
                                      _mm512_set1_ps(multiplier[scales[b]]));
      for (int r = 0; r < N; ++r) acc[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[r] + b * kNvfp4Block), acc[r]);
    }
    for (int r = 0; r < N; ++r) y[r][o] = _mm512_reduce_add_ps(acc[r]);
  }
}

}  // namespace

RowKernels<Nvfp4DotFn> nvfp4_dot_avx2() {
  return row_kernels<Nvfp4DotFn>([]<int N>() { return &nvfp4_dot_rows_avx2<N>; });
}
RowKernels<Nvfp4DotFn> nvfp4_dot_avx512() {
  return row_kernels<Nvfp4DotFn>([]<int N>() { return &nvfp4_dot_rows_avx512<N>; });
}

}  // namespace nvfp4lm::cpu::x86
#endif  // NVFP4LM_X86_INTRINSICS
