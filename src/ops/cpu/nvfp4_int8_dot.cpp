// See nvfp4_int8_dot.h. One chunk is 64 code bytes = 128 weights = 8 blocks. As 16 int32 lanes: lane L sums the
// weights of code bytes 4L..4L+3 (elements 8L..8L+7, half of block L/2): their low nibbles times activations
// q[4L..4L+3] of the reordered chunk, their high nibbles times q[64+4L..64+4L+3]. In integers,
//   D_L = bias_L + Σ (2·e2m1(c) + 12)·q = Σ 2·e2m1(c)·q,   D_b = D_2b + D_2b+1 (the block's two lanes),
// and then, in fp32, acc_b += D_b · (m_b · scale_b), where m_b = e4m3(scale byte) / 256 is what vcvtph2ps makes of
// the byte's 7 low bits placed in an fp16 (an E4M3 is an fp16 with one exponent bit fewer: the same value times
// 2^-8 for every byte, subnormals included) and scale_b = 128·s_b. The row's result is
// tensor_scale · Σ_b acc_b = tensor_scale / 2 · Σ_b e4m3_b · s_b · D_b.
#include "ops/cpu/nvfp4_int8_dot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ops/cpu/isa_limit.h"
#include "ops/cpu/simd.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::cpu {
namespace {

constexpr int kBlock = 16;
constexpr int kLanes = 16;       // int32 lanes per chunk
constexpr int kChunkBytes = 64;  // code bytes per chunk
constexpr int kBlocksPerChunk = 8;
constexpr float kScaleFactor = 128.0f;    // scale_b = 128·s_b: 2^8 undoes m_b's 2^-8, 1/2 undoes the doubled codes
constexpr int64_t kPrefetchBytes = 1024;  // how far ahead of the codes the AVX-512 kernel prefetches

// ---- scalar: the lanes above, one at a time ----------------------------------------------------------------
template <int N>
void rows_scalar(const Nvfp4Rows& w, int64_t first, int64_t last, const Int8Activations* const* x, float* const* y) {
  const std::array<int8_t, 16> table = int8_weight_table();
  const int64_t row_bytes = w.cols / 2, blocks = w.cols / kBlock;
  const int64_t chunks = (w.cols + kInt8Chunk - 1) / kInt8Chunk;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * row_bytes;
    const uint8_t* scales = w.scales + o * blocks;
    float acc[N][2 * kBlocksPerChunk] = {};  // one sum per block of a pair of chunks
    for (int64_t c = 0; c < chunks; ++c) {
      for (int lane = 0; lane < kLanes; lane += 2) {  // a block's two lanes together
        const int64_t block = c * kBlocksPerChunk + lane / 2;
        const float m = block < blocks ? e4m3_to_float(scales[block]) / 256.0f : 0.0f;
        for (int r = 0; r < N; ++r) {
          const int8_t* q = x[r]->q.data() + c * kInt8Chunk;
          int32_t d = x[r]->bias[static_cast<size_t>(c * kLanes + lane)] +
                      x[r]->bias[static_cast<size_t>(c * kLanes + lane + 1)];
          for (int pair_lane = lane; pair_lane < lane + 2; ++pair_lane)
            for (int k = 0; k < 4; ++k) {
              const int64_t byte = c * kChunkBytes + 4 * pair_lane + k;
              const uint8_t code = byte < row_bytes ? codes[byte] : 0;  // zero past the row's end
              d += table[code & 0xF] * q[4 * pair_lane + k] + table[code >> 4] * q[64 + 4 * pair_lane + k];
            }
          float& sum = acc[r][block % (2 * kBlocksPerChunk)];
          sum = std::fma(static_cast<float>(d), m * x[r]->scale[static_cast<size_t>(block)], sum);
        }
      }
    }
    for (int r = 0; r < N; ++r) {
      float sum = 0.f;
      for (float block_sum : acc[r]) sum += block_sum;
      y[r][o] = w.tensor_scale * sum;
    }
  }
}

#if NVFP4LM_X86_INTRINSICS
#pragma GCC diagnostic push
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC PR 105593, as in nvfp4_dot.cpp
#endif

// ---- AVX2: a chunk as two 32-byte halves (blocks 0..3 and 4..7); vpmaddubsw + vpmaddwd for vpdpbusd ----------
template <int N>
__attribute__((target("avx2,fma,f16c"))) void rows_avx2(const Nvfp4Rows& w, int64_t first, int64_t last,
                                                        const Int8Activations* const* x, float* const* y) {
  const std::array<int8_t, 16> table = int8_weight_table();
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table.data())));
  const __m256i nibble = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  // vphaddd of the halves' lane sums gives blocks 0, 1, 4, 5, 2, 3, 6, 7; this puts them back in order.
  const __m256i block_order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  const int64_t row_bytes = w.cols / 2, blocks = w.cols / kBlock;
  const int64_t full_chunks = w.cols / kInt8Chunk, chunks = (w.cols + kInt8Chunk - 1) / kInt8Chunk;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * row_bytes;
    const uint8_t* scales = w.scales + o * blocks;
    __m256 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t c = 0; c < chunks; ++c) {
      alignas(32) uint8_t tail_codes[kChunkBytes] = {}, tail_scales[8] = {};
      const uint8_t* chunk_codes = codes + c * kChunkBytes;
      const uint8_t* chunk_scales = scales + c * kBlocksPerChunk;
      if (c == full_chunks) {  // the last, partial chunk: copy what the row has, zeros after
        std::memcpy(tail_codes, chunk_codes, static_cast<size_t>(row_bytes - c * kChunkBytes));
        std::memcpy(tail_scales, chunk_scales, static_cast<size_t>(blocks - c * kBlocksPerChunk));
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
        const int32_t* bias = x[r]->bias.data() + c * kLanes;
        __m256i d[2];
        for (int half = 0; half < 2; ++half) {
          const __m256i q_low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * half));
          const __m256i q_high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 + 32 * half));
          d[half] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + 8 * half));
          d[half] = _mm256_add_epi32(d[half], _mm256_madd_epi16(_mm256_maddubs_epi16(weights[half][0], q_low), ones));
          d[half] = _mm256_add_epi32(d[half], _mm256_madd_epi16(_mm256_maddubs_epi16(weights[half][1], q_high), ones));
        }
        const __m256i block_sums = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(d[0], d[1]), block_order);
        const __m256 block_scale = _mm256_mul_ps(m, _mm256_loadu_ps(x[r]->scale.data() + c * kBlocksPerChunk));
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
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,f16c"))) void rows_avx512(
    const Nvfp4Rows& w, int64_t first, int64_t last, const Int8Activations* const* x, float* const* y) {
  const std::array<int8_t, 64> tables = int8_weight_table_x4();
  const __m512i lut = _mm512_loadu_si512(tables.data());
  const __m512i even_lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd_lanes = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const int64_t row_bytes = w.cols / 2, blocks = w.cols / kBlock;
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
      _mm_prefetch(reinterpret_cast<const char*>(codes + p * 2 * kChunkBytes + kPrefetchBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(codes + p * 2 * kChunkBytes + kPrefetchBytes + 64), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(scales + p * 16 + kPrefetchBytes / 8), _MM_HINT_T0);
      __m512i weights[2][2];  // [chunk][low / high nibbles]; zero codes past the row's end (they meet zero q's)
      for (int chunk = 0; chunk < 2; ++chunk) {
        const int64_t left = row_bytes - (2 * p + chunk) * kChunkBytes;
        const __m512i v = left >= 64 ? _mm512_loadu_si512(codes + (2 * p + chunk) * kChunkBytes)
                                     : _mm512_maskz_loadu_epi8(left <= 0 ? __mmask64{0} : (__mmask64{1} << left) - 1,
                                                               codes + (2 * p + chunk) * kChunkBytes);
        weights[chunk][0] = _mm512_permutexvar_epi8(v, lut);
        weights[chunk][1] = _mm512_permutexvar_epi8(_mm512_srli_epi16(v, 4), lut);
      }
      for (int r = 0; r < N; ++r) {
        const int8_t* q = x[r]->q.data() + p * kInt8Padding;
        const int32_t* bias = x[r]->bias.data() + p * 2 * kLanes;
        __m512i d[2];
        for (int chunk = 0; chunk < 2; ++chunk) {
          d[chunk] = _mm512_loadu_si512(bias + chunk * kLanes);
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
#pragma GCC diagnostic pop
#endif  // NVFP4LM_X86_INTRINSICS

using RowsFn = void (*)(const Nvfp4Rows&, int64_t, int64_t, const Int8Activations* const*, float* const*);

template <int N>
struct Kernels {
#if NVFP4LM_X86_INTRINSICS
  static constexpr RowsFn scalar = rows_scalar<N>, avx2 = rows_avx2<N>, avx512 = rows_avx512<N>;
#else
  static constexpr RowsFn scalar = rows_scalar<N>, avx2 = scalar, avx512 = scalar;
#endif
};

}  // namespace

// 2·e2m1(code) + 12 for the 16 codes: 0, 1, 2, 3, 4, 6, 8, 12 and their negatives (code 8 is -0).
std::array<int8_t, 16> int8_weight_table() {
  std::array<int8_t, 16> table{};
  for (int c = 0; c < 16; ++c)
    table[static_cast<size_t>(c)] =
        static_cast<int8_t>(std::lround(2.0f * e2m1_to_float(static_cast<uint8_t>(c))) + kInt8WeightOffset);
  return table;
}

std::array<int8_t, 64> int8_weight_table_x4() {
  const std::array<int8_t, 16> table = int8_weight_table();
  std::array<int8_t, 64> tables{};
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = table[i % 16];
  return tables;
}

float quantize_int8_block(const float* x, int8_t* q) {
  float max_abs = 0.0f;
  bool finite = true;
  for (int i = 0; i < kBlock; ++i) {
    finite = finite && std::isfinite(x[i]);
    max_abs = std::max(max_abs, std::abs(x[i]));
  }
  if (!finite || max_abs == 0.0f) {
    std::fill(q, q + kBlock, int8_t{0});
    return (!finite ? NAN : 0.0f);
  }
  const float inverse = 127.0f / max_abs;
  for (int i = 0; i < kBlock; ++i)
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inverse), -127.0f, 127.0f));
  return max_abs / 127.0f * kScaleFactor;
}

void quantize_int8_activations(const float* x, int64_t cols, Int8Activations& out) {
  NVFP4LM_ASSERT(cols % kBlock == 0, "quantize_int8_activations: {} columns is not a multiple of {}", cols, kBlock);
  const int64_t padded = int8_padded_cols(cols);
  out.cols = cols;
  out.q.assign(static_cast<size_t>(padded), 0);
  out.bias.assign(static_cast<size_t>(padded / 8), 0);
  out.int8_weight_bias.assign(static_cast<size_t>(padded / 8), 0);
  out.scale.assign(static_cast<size_t>(padded / kBlock), 0.0f);
  for (int64_t b = 0; b < cols / kBlock; ++b) {
    int8_t block[kBlock];
    out.scale[static_cast<size_t>(b)] = quantize_int8_block(x + b * kBlock, block);
    for (int i = 0; i < kBlock; ++i) out.q[static_cast<size_t>(int8_position(b * kBlock + i))] = block[i];
    const int64_t chunk = b / kBlocksPerChunk, first_lane = 2 * (b % kBlocksPerChunk);
    const int8_t* q = out.q.data() + chunk * kInt8Chunk;
    for (int64_t lane = first_lane; lane < first_lane + 2; ++lane) {
      int32_t sum = 0;
      for (int k = 0; k < 4; ++k) sum += q[4 * lane + k] + q[64 + 4 * lane + k];
      out.bias[static_cast<size_t>(chunk * kLanes + lane)] = -kInt8WeightOffset * sum;
      out.int8_weight_bias[static_cast<size_t>(chunk * kLanes + lane)] = -128 * sum;
    }
  }
}

bool int8_dot_isa_supported(DotIsa isa) {
  switch (isa) {
    case DotIsa::Scalar:
      return true;
#if NVFP4LM_X86_INTRINSICS
    case DotIsa::Avx2:
      // Every AVX2 CPU has F16C (Haswell, Excavator and later); clang's __builtin_cpu_supports has no "f16c".
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case DotIsa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
             __builtin_cpu_supports("avx512vbmi");
#else
    case DotIsa::Avx2:
    case DotIsa::Avx512:
      return false;
#endif
  }
  return false;
}

std::vector<DotIsa> supported_int8_dot_isas() { return dot_isas_where(int8_dot_isa_supported); }

DotIsa best_int8_dot_isa() {
  // The AVX-512 variant needs VNNI and VBMI: only an uncapped run picks it.
  static const DotIsa best = widest_allowed(supported_int8_dot_isas(), [](DotIsa isa) {
    return isa == DotIsa::Avx512 ? IsaLevel::Avx512All : isa == DotIsa::Avx2 ? IsaLevel::Avx2 : IsaLevel::Scalar;
  });
  return best;
}

const char* int8_dot_isa_name(DotIsa isa) {
  switch (isa) {
    case DotIsa::Scalar:
      return "scalar";
    case DotIsa::Avx2:
      return "avx2";
    case DotIsa::Avx512:
      return "avx512vnni+vbmi";
  }
  return "?";
}

void nvfp4_int8_dot_rows(DotIsa isa, const Nvfp4Rows& w, int64_t first, int64_t last,
                         const Int8Activations* const* x_rows, float* const* y_rows, int n) {
  NVFP4LM_ASSERT(n >= 1 && n <= kDotMaxRows, "nvfp4_int8_dot_rows: {} activation rows (1..{})", n, kDotMaxRows);
  NVFP4LM_ASSERT(w.cols % kBlock == 0, "nvfp4_int8_dot_rows: {} columns is not a multiple of {}", w.cols, kBlock);
  NVFP4LM_ASSERT(int8_dot_isa_supported(isa), "nvfp4_int8_dot_rows: this CPU cannot run the {} variant",
                 int8_dot_isa_name(isa));
  for (int r = 0; r < n; ++r)
    NVFP4LM_ASSERT(x_rows[r]->cols == w.cols, "nvfp4_int8_dot_rows: activations of {} columns for a weight of {}",
                   x_rows[r]->cols, w.cols);
  if (first >= last) return;
  pick_dot_kernel<RowsFn, Kernels>(isa, n)(w, first, last, x_rows, y_rows);
}

}  // namespace nvfp4lm::cpu
