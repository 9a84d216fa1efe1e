// SIMD building blocks of the x86 kernel variants (this folder), beside the portable reference in ops/cpu/.
//
// NVFP4LM_X86_LEVELS: 1 where portable kernels are also compiled per x86-64 level (ops/cpu/x86/levels.h; GCC only:
// clang has no probe for the levels).
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define NVFP4LM_X86_LEVELS 1
#else
#define NVFP4LM_X86_LEVELS 0
#endif

// NVFP4LM_X86_INTRINSICS: x86-64 kernel variants written with intrinsics under target attributes (AVX2, AVX-512),
// chosen at run time (ops/cpu/kernel_family.h), so a portable build still runs them where the CPU has the units (the
// dot and BF16 GEMM kernels). 0 elsewhere: only the portable variants are built.
#if defined(__x86_64__) && defined(__GNUC__)
#define NVFP4LM_X86_INTRINSICS 1
#include <immintrin.h>

namespace nvfp4lm::cpu {

// The sum of a __m256's 8 lanes in one fixed order (the two halves, then pairs, then the last two): the AVX2 dot
// kernels' final reduction, so each kernel's results repeat bit for bit.
__attribute__((target("avx2,fma"))) inline float avx2_lane_sum(__m256 v) {
  const __m128 pair = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 two = _mm_add_ps(pair, _mm_movehl_ps(pair, pair));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps(two, two, 1)));
}

// E4M3 bytes (zero-extended to 16 bits) -> fp16 bits of e4m3 / 256: shifted left by 7, the byte's sign lands on bit
// 14 and exponent / mantissa in the fp16's; adding bit 14 to itself moves the sign to bit 15.
__attribute__((target("avx2"))) inline __m256i e4m3_as_fp16(__m256i bytes16) {
  const __m256i shifted = _mm256_slli_epi16(bytes16, 7);
  return _mm256_add_epi16(shifted, _mm256_and_si256(shifted, _mm256_set1_epi16(0x4000)));
}
__attribute__((target("avx2"))) inline __m128i e4m3_as_fp16(__m128i bytes8) {
  const __m128i shifted = _mm_slli_epi16(bytes8, 7);
  return _mm_add_epi16(shifted, _mm_and_si128(shifted, _mm_set1_epi16(0x4000)));
}

}  // namespace nvfp4lm::cpu
#else
#define NVFP4LM_X86_INTRINSICS 0
#endif
