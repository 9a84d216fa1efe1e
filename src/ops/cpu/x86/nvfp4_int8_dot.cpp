// See ../nvfp4_int8_dot.h: its AVX2 and AVX-512 VNNI + VBMI variants (the portable one is in ../nvfp4_int8_dot.cpp).
#include "ops/cpu/x86/kernels.h"

#if NVFP4LM_X86_INTRINSICS
#include <array>
#include <cstring>

#include "ops/cpu/x86/simd.h"

namespace nvfp4lm::cpu::x86 {
namespace {

constexpr int64_t kPrefetchBytes = 1024;  // how far ahead of the codes the AVX-512 kernel prefetches

// ---- AVX2: a chunk as two 32-byte halves (blocks 0..3 and 4..7); vpmaddubsw + vpmaddwd for vpdpbusd ----------
template <int N>
__attribute__((target("avx2,fma,f16c"))) void int8_dot_rows_avx2(const Nvfp4Rows& w, int64_t first, int64_t last,
                                                                 const Int8Activations* const* x, float* const* y) {
  const std::array<int8_t, 16> table = int8_weight_table();
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table.data())));
  const __m256i nibble = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  // vphaddd of the halves' lane sums gives blocks 0, 1, 4, 5, 2, 3, 6, 7; this puts them back in order.
  const __m256i block_order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  const int64_t row_bytes = w.cols / 2, blocks = w.cols / kNvfp4Block;
  const int64_t full_chunks = w.cols / kInt8Chunk, chunks = (w.cols + kInt8Chunk - 1) / kInt8Chunk;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * row_bytes;
    const uint8_t* scales = w.scales + o * blocks;
    __m256 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t c = 0; c < chunks; ++c) {
      alignas(32) uint8_t tail_codes[kInt8ChunkCodeBytes] = {}, tail_scales[8] = {};
      const uint8_t* chunk_codes = codes + c * kInt8ChunkCodeBytes;
      const uint8_t* chunk_scales = scales + c * kInt8BlocksPerChunk;
      if (c == full_chunks) {  // the last, partial chunk: copy what the row has, zeros after
        std::memcpy(tail_codes, chunk_codes, static_cast<size_t>(row_bytes - c * kInt8ChunkCodeBytes));
        std::memcpy(tail_scales, chunk_scales, static_cast<size_t>(blocks - c * kInt8BlocksPerChunk));
        chunk_codes = tail_codes;
        chunk_scales = tail_scales;
      }
      const __m256 m = _mm256_cvtph_ps(
          e4m3_as_fp16(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(chunk_scales)))));
      __m256i weights[2][2];  // [half][low / high nibbles]
      for (int half = 0; half < 2; ++half) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk_codes + 32 * half));
        weights[half][0] = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, nibble));
        weights[half][1] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
      }
      for (int r = 0; r < N; ++r) {
        const int8_t* q = x[r]->q.data() + c * kInt8Chunk;
        const int32_t* bias = x[r]->bias.data() + c * kInt8ChunkLanes;
        __m256i d[2];
        for (int half = 0; half < 2; ++half) {
          const __m256i q_low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * half));
          const __m256i q_high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 + 32 * half));
          d[half] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + 8 * half));
          d[half] = _mm256_add_epi32(d[half], _mm256_madd_epi16(_mm256_maddubs_epi16(weights[half][0], q_low), ones));
          d[half] = _mm256_add_epi32(d[half], _mm256_madd_epi16(_mm256_maddubs_epi16(weights[half][1], q_high), ones));
        }
        const __m256i block_sums = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(d[0], d[1]), block_order);
        const __m256 block_scale = _mm256_mul_ps(m, _mm256_loadu_ps(x[r]->scale.data() + c * kInt8BlocksPerChunk));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_sums), block_scale, acc[r]);
      }
    }
    for (int r = 0; r < N; ++r) y[r][o] = w.tensor_scale * avx2_lane_sum(acc[r]);
  }
}

// ---- AVX-512 VNNI + VBMI: two chunks (16 blocks) a step ------------------------------------------------------
// Per chunk: one 64-byte load; vpermb looks the weights up from the low 6 bits of each byte, so with the table
// repeated 4 times neither nibble needs masking; two vpdpbusd. Per pair of chunks: the 16 scale bytes decoded at
// once, the two chunks' lane pairs summed into 16 block sums by two vpermt2d, one convert, one FMA.
template <int N>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,f16c"))) void int8_dot_rows_avx512(
    const Nvfp4Rows& w, int64_t first, int64_t last, const Int8Activations* const* x, float* const* y) {
  const std::array<int8_t, 64> tables = int8_weight_table_x4();
  const __m512i lut = _mm512_loadu_si512(tables.data());
  const __m512i even_lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd_lanes = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const int64_t row_bytes = w.cols / 2, blocks = w.cols / kNvfp4Block;
  const int64_t pairs = int8_padded_cols(w.cols) / kInt8Padding;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * row_bytes;
    const uint8_t* scales = w.scales + o * blocks;
    __m512 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t p = 0; p < pairs; ++p) {
      const int64_t scales_left = blocks - p * 16;  // >= 1: the pair starts inside the row
      const __m128i scale_bytes =
          scales_left >= 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + p * 16))
                            : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << scales_left) - 1), scales + p * 16);
      const __m512 m = _mm512_cvtph_ps(e4m3_as_fp16(_mm256_cvtepu8_epi16(scale_bytes)));
      // The hardware prefetcher alone keeps too few lines in flight for this loop (measured: 25.5 -> 28.7 GB/s from
      // memory on 2 Zen 4 cores with 1 KiB ahead; 2 and 4 KiB no better). Past the row it reaches the next rows.
      _mm_prefetch(reinterpret_cast<const char*>(codes + p * 2 * kInt8ChunkCodeBytes + kPrefetchBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(codes + p * 2 * kInt8ChunkCodeBytes + kPrefetchBytes + 64),
                   _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(scales + p * 16 + kPrefetchBytes / 8), _MM_HINT_T0);
      __m512i weights[2][2];  // [chunk][low / high nibbles]; zero codes past the row's end (they meet zero q's)
      for (int chunk = 0; chunk < 2; ++chunk) {
        const int64_t left = row_bytes - (2 * p + chunk) * kInt8ChunkCodeBytes;
        const __m512i v = left >= 64 ? _mm512_loadu_si512(codes + (2 * p + chunk) * kInt8ChunkCodeBytes)
                                     : _mm512_maskz_loadu_epi8(left <= 0 ? __mmask64{0} : (__mmask64{1} << left) - 1,
                                                               codes + (2 * p + chunk) * kInt8ChunkCodeBytes);
        weights[chunk][0] = _mm512_permutexvar_epi8(v, lut);
        weights[chunk][1] = _mm512_permutexvar_epi8(_mm512_srli_epi16(v, 4), lut);
      }
      for (int r = 0; r < N; ++r) {
        const int8_t* q = x[r]->q.data() + p * kInt8Padding;
        const int32_t* bias = x[r]->bias.data() + p * 2 * kInt8ChunkLanes;
        __m512i d[2];
        for (int chunk = 0; chunk < 2; ++chunk) {
          d[chunk] = _mm512_loadu_si512(bias + chunk * kInt8ChunkLanes);
          d[chunk] = _mm512_dpbusd_epi32(d[chunk], weights[chunk][0], _mm512_loadu_si512(q + chunk * kInt8Chunk));
          d[chunk] = _mm512_dpbusd_epi32(d[chunk], weights[chunk][1], _mm512_loadu_si512(q + chunk * kInt8Chunk + 64));
        }
        const __m512i block_sums = _mm512_add_epi32(_mm512_permutex2var_epi32(d[0], even_lanes, d[1]),
                                                    _mm512_permutex2var_epi32(d[0], odd_lanes, d[1]));
        const __m512 block_scale = _mm512_mul_ps(m, _mm512_loadu_ps(x[r]->scale.data() + p * 16));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sums), block_scale, acc[r]);
      }
    }
    for (int r = 0; r < N; ++r) y[r][o] = w.tensor_scale * _mm512_reduce_add_ps(acc[r]);
  }
}

}  // namespace

RowKernels<Int8DotFn> nvfp4_int8_dot_avx2() {
  return row_kernels<Int8DotFn>([]<int N>() { return &int8_dot_rows_avx2<N>; });
}
RowKernels<Int8DotFn> nvfp4_int8_dot_avx512vnni() {
  return row_kernels<Int8DotFn>([]<int N>() { return &int8_dot_rows_avx512<N>; });
}

}  // namespace nvfp4lm::cpu::x86
#endif  // NVFP4LM_X86_INTRINSICS
