// See ../nvfp4_interleaved.h: its AVX-512 VNNI + VBMI variant (the portable one is in ../nvfp4_interleaved.cpp).
#include "ops/cpu/x86/kernels.h"

#if NVFP4LM_X86_INTRINSICS
#include <algorithm>
#include <array>
#include <cstring>

#include "ops/cpu/x86/simd.h"

namespace nvfp4lm::cpu::x86 {
namespace {

// ---- AVX-512 VNNI + VBMI: a block of 16 rows is 2 loads, 4 vpermb, 4 vpdpbusd a row of x, one scale decode ------
template <int N>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,f16c"))) void groups_avx512(
    const Nvfp4Interleaved& w, int64_t first, int64_t last, const Int8BlockActivations* const* x, float* const* y) {
  const std::array<int8_t, 64> tables = int8_weight_table_x4();
  const __m512i lut = _mm512_loadu_si512(tables.data());
  const int64_t blocks = w.cols / kNvfp4Block;
  for (int64_t g = first; g < last; ++g) {
    __m512 acc[N][2];
    for (int r = 0; r < N; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const uint8_t* block = interleaved_block_at(w, g, 0);
    for (int64_t b = 0; b < blocks; ++b, block += kInterleavedBlockBytes) {
      const __m512i v0 = _mm512_loadu_si512(block), v1 = _mm512_loadu_si512(block + kInterleavedHalfBytes);
      const __m512i w0_low = _mm512_permutexvar_epi8(v0, lut);
      const __m512i w0_high = _mm512_permutexvar_epi8(_mm512_srli_epi16(v0, 4), lut);
      const __m512i w1_low = _mm512_permutexvar_epi8(v1, lut);
      const __m512i w1_high = _mm512_permutexvar_epi8(_mm512_srli_epi16(v1, 4), lut);
      const __m512 m = _mm512_cvtph_ps(
          e4m3_as_fp16(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 128)))));
      for (int r = 0; r < N; ++r) {
        const int8_t* q = x[r]->q.data() + b * kNvfp4Block;
        int32_t q4[4];
        std::memcpy(q4, q, sizeof q4);
        // Two independent chains of two vpdpbusd each, added at the end.
        __m512i d = _mm512_dpbusd_epi32(_mm512_set1_epi32(x[r]->bias[static_cast<size_t>(b)]), w0_low,
                                        _mm512_set1_epi32(q4[0]));
        __m512i e = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0_high, _mm512_set1_epi32(q4[1]));
        d = _mm512_dpbusd_epi32(d, w1_low, _mm512_set1_epi32(q4[2]));
        e = _mm512_dpbusd_epi32(e, w1_high, _mm512_set1_epi32(q4[3]));
        const __m512 scale = _mm512_mul_ps(m, _mm512_set1_ps(x[r]->scale[static_cast<size_t>(b)]));
        acc[r][b % 2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d, e)), scale, acc[r][b % 2]);
      }
    }
    const int64_t count = std::min(kInterleaveRows, w.rows - g * kInterleaveRows);
    const auto mask = static_cast<__mmask16>((1u << count) - 1);
    for (int r = 0; r < N; ++r)
      _mm512_mask_storeu_ps(y[r] + g * kInterleaveRows, mask,
                            _mm512_mul_ps(_mm512_add_ps(acc[r][0], acc[r][1]), _mm512_set1_ps(w.tensor_scale)));
  }
}

}  // namespace

RowKernels<InterleavedDotFn> nvfp4_interleaved_avx512vnni() {
  return row_kernels<InterleavedDotFn>([]<int N>() { return &groups_avx512<N>; });
}

}  // namespace nvfp4lm::cpu::x86
#endif  // NVFP4LM_X86_INTRINSICS
