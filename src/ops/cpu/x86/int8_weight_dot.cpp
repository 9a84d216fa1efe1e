// See ../int8_weight_dot.h: its AVX2 and AVX-512 VNNI variants (the portable one is in ../int8_weight_dot.cpp).
#include "ops/cpu/x86/kernels.h"

#if NVFP4LM_X86_INTRINSICS

#include "ops/cpu/x86/simd.h"

namespace nvfp4lm::cpu::x86 {
namespace {

// ---- AVX2: per chunk, vpmaddubsw + vpmaddwd for vpdpbusd, vphaddd for the lane pairs -------------------------
template <int N>
__attribute__((target("avx2,fma"))) void int8_weight_rows_avx2(const Int8Weights& w, int64_t first, int64_t last,
                                                               const Int8Activations* const* x, float* const* y) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i block_order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);  // as in nvfp4_int8_dot.cpp
  const int64_t chunks = w.padded_cols / kInt8Chunk, blocks_per_row = w.padded_cols / kNvfp4Block;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* values = w.values.data() + o * w.padded_cols;
    const uint16_t* scales = w.scales.data() + o * blocks_per_row;
    __m256 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t c = 0; c < chunks; ++c) {
      const __m256 t = _mm256_castsi256_ps(_mm256_slli_epi32(
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + c * 8))), 16));
      __m256i v[2][2];  // [half][low / high nibble positions]
      for (int half = 0; half < 2; ++half)
        for (int part = 0; part < 2; ++part)
          v[half][part] =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + c * kInt8Chunk + 64 * part + 32 * half));
      for (int r = 0; r < N; ++r) {
        const int8_t* q = x[r]->q.data() + c * kInt8Chunk;
        const int32_t* bias = x[r]->int8_weight_bias.data() + c * kInt8ChunkLanes;
        __m256i d[2];
        for (int half = 0; half < 2; ++half) {
          d[half] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + 8 * half));
          for (int part = 0; part < 2; ++part) {
            const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * part + 32 * half));
            // u + 128 <= 255 times |q| <= 127, two per 16-bit sum: <= 64,770 — past int16. Split into the high
            // and low bits of the unsigned value so that vpmaddubsw cannot saturate.
            const __m256i high = _mm256_and_si256(v[half][part], _mm256_set1_epi8(static_cast<char>(0xF0)));
            const __m256i low = _mm256_and_si256(v[half][part], _mm256_set1_epi8(0x0F));
            d[half] = _mm256_add_epi32(
                d[half],
                _mm256_slli_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_srli_epi16(high, 4), qv), ones), 4));
            d[half] = _mm256_add_epi32(d[half], _mm256_madd_epi16(_mm256_maddubs_epi16(low, qv), ones));
          }
        }
        const __m256i block_sums = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(d[0], d[1]), block_order);
        const __m256 block_scale = _mm256_mul_ps(t, _mm256_loadu_ps(x[r]->scale.data() + c * 8));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_sums), block_scale, acc[r]);
      }
    }
    for (int r = 0; r < N; ++r) y[r][o] = avx2_lane_sum(acc[r]) * kInt8WeightUnscale;
  }
}

// ---- AVX-512 VNNI: a pair of chunks a step, two vpermt2d for the lane pairs ----------------------------------
template <int N>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void int8_weight_rows_avx512(
    const Int8Weights& w, int64_t first, int64_t last, const Int8Activations* const* x, float* const* y) {
  const __m512i even_lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd_lanes = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const int64_t pairs = w.padded_cols / kInt8Padding, blocks_per_row = w.padded_cols / kNvfp4Block;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* values = w.values.data() + o * w.padded_cols;
    const uint16_t* scales = w.scales.data() + o * blocks_per_row;
    __m512 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t p = 0; p < pairs; ++p) {
      const __m512 t = _mm512_castsi512_ps(_mm512_slli_epi32(
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + p * kInt8BlocksPerPair))),
          16));
      const uint8_t* v = values + p * kInt8Padding;
      for (int64_t ahead = 0; ahead < kInt8Padding; ahead += 64)  // as nvfp4_int8_dot.cpp: 1 KiB ahead
        _mm_prefetch(reinterpret_cast<const char*>(v + 1024 + ahead), _MM_HINT_T0);
      const __m512i v0 = _mm512_loadu_si512(v), v1 = _mm512_loadu_si512(v + 64), v2 = _mm512_loadu_si512(v + 128),
                    v3 = _mm512_loadu_si512(v + 192);
      for (int r = 0; r < N; ++r) {
        const int8_t* q = x[r]->q.data() + p * kInt8Padding;
        const int32_t* bias = x[r]->int8_weight_bias.data() + p * 2 * kInt8ChunkLanes;
        __m512i d0 = _mm512_loadu_si512(bias), d1 = _mm512_loadu_si512(bias + kInt8ChunkLanes);
        d0 = _mm512_dpbusd_epi32(d0, v0, _mm512_loadu_si512(q));
        d0 = _mm512_dpbusd_epi32(d0, v1, _mm512_loadu_si512(q + 64));
        d1 = _mm512_dpbusd_epi32(d1, v2, _mm512_loadu_si512(q + 128));
        d1 = _mm512_dpbusd_epi32(d1, v3, _mm512_loadu_si512(q + 192));
        const __m512i block_sums = _mm512_add_epi32(_mm512_permutex2var_epi32(d0, even_lanes, d1),
                                                    _mm512_permutex2var_epi32(d0, odd_lanes, d1));
        const __m512 block_scale = _mm512_mul_ps(t, _mm512_loadu_ps(x[r]->scale.data() + p * kInt8BlocksPerPair));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sums), block_scale, acc[r]);
      }
    }
    for (int r = 0; r < N; ++r) y[r][o] = _mm512_reduce_add_ps(acc[r]) * kInt8WeightUnscale;
  }
}

}  // namespace

RowKernels<Int8WeightDotFn> int8_weight_dot_avx2() {
  return row_kernels<Int8WeightDotFn>([]<int N>() { return &int8_weight_rows_avx2<N>; });
}
RowKernels<Int8WeightDotFn> int8_weight_dot_avx512vnni() {
  return row_kernels<Int8WeightDotFn>([]<int N>() { return &int8_weight_rows_avx512<N>; });
}

}  // namespace nvfp4lm::cpu::x86
#endif  // NVFP4LM_X86_INTRINSICS
