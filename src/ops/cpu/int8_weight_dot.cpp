// See int8_weight_dot.h. A row's values use the activations' chunk layout (ops/cpu/nvfp4_int8_dot.h): per chunk of
// 128, the 64 even elements then the 64 odd ones, so int32 lane L of a chunk's two vpdpbusd holds half of block L/2.
// Per pair of chunks the 32 lanes become 16 block sums D_b, then acc_b += D_b · (t_b · scale_b) with scale_b the
// activations' 128·s_b; the row's result is Σ_b acc_b / 128.
#include "ops/cpu/int8_weight_dot.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/numeric.h"
#include "ops/cpu/simd.h"

namespace nvfp4lm::cpu {
namespace {

constexpr int kBlock = 16;
constexpr int kLanes = 16;                 // int32 lanes per chunk
constexpr int kBlocksPerPair = 16;         // blocks per pair of chunks
constexpr float kUnscale = 1.0f / 128.0f;  // undoes the activations' 128·s_b

// t as a BF16 no smaller than t (t >= 0 and finite): so that |w| / t_b <= 127 for the block's largest |w|.
uint16_t bf16_round_up(float t) {
  uint16_t bits = float_to_bf16(t);
  if (bf16_to_float(bits) < t) ++bits;
  return bits;
}

// ---- scalar ---------------------------------------------------------------------------------------------------
template <int N>
void rows_scalar(const Int8Weights& w, int64_t first, int64_t last, const Int8Activations* const* x, float* const* y) {
  const int64_t pairs = w.padded_cols / kInt8Padding, blocks_per_row = w.padded_cols / kBlock;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* values = w.values.data() + o * w.padded_cols;
    const uint16_t* scales = w.scales.data() + o * blocks_per_row;
    float acc[N][kBlocksPerPair] = {};
    for (int64_t p = 0; p < pairs; ++p)
      for (int j = 0; j < kBlocksPerPair; ++j) {
        const int64_t chunk = 2 * p + j / 8, block = p * kBlocksPerPair + j, first_lane = 2 * (j % 8);
        const uint8_t* v = values + chunk * kInt8Chunk;
        const float t = bf16_to_float(scales[block]);
        for (int r = 0; r < N; ++r) {
          const int8_t* q = x[r]->q.data() + chunk * kInt8Chunk;
          const int32_t* bias = x[r]->int8_weight_bias.data() + chunk * kLanes;
          int32_t d = bias[first_lane] + bias[first_lane + 1];
          for (int64_t i = 4 * first_lane; i < 4 * first_lane + 8; ++i) d += v[i] * q[i] + v[64 + i] * q[64 + i];
          acc[r][j] = std::fma(static_cast<float>(d), t * x[r]->scale[static_cast<size_t>(block)], acc[r][j]);
        }
      }
    for (int r = 0; r < N; ++r) {
      float sum = 0.f;
      for (float block_sum : acc[r]) sum += block_sum;
      y[r][o] = sum * kUnscale;
    }
  }
}

#if NVFP4LM_X86_INTRINSICS
#pragma GCC diagnostic push
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC PR 105593, as in nvfp4_dot.cpp
#endif

// ---- AVX2: per chunk, vpmaddubsw + vpmaddwd for vpdpbusd, vphaddd for the lane pairs -------------------------
template <int N>
__attribute__((target("avx2,fma"))) void rows_avx2(const Int8Weights& w, int64_t first, int64_t last,
                                                   const Int8Activations* const* x, float* const* y) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i block_order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);  // as in nvfp4_int8_dot.cpp
  const int64_t chunks = w.padded_cols / kInt8Chunk, blocks_per_row = w.padded_cols / kBlock;
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
        const int32_t* bias = x[r]->int8_weight_bias.data() + c * kLanes;
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
    for (int r = 0; r < N; ++r) y[r][o] = avx2_lane_sum(acc[r]) * kUnscale;
  }
}

// ---- AVX-512 VNNI: a pair of chunks a step, two vpermt2d for the lane pairs ----------------------------------
template <int N>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void rows_avx512(const Int8Weights& w, int64_t first,
                                                                                 int64_t last,
                                                                                 const Int8Activations* const* x,
                                                                                 float* const* y) {
  const __m512i even_lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd_lanes = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const int64_t pairs = w.padded_cols / kInt8Padding, blocks_per_row = w.padded_cols / kBlock;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* values = w.values.data() + o * w.padded_cols;
    const uint16_t* scales = w.scales.data() + o * blocks_per_row;
    __m512 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t p = 0; p < pairs; ++p) {
      const __m512 t = _mm512_castsi512_ps(_mm512_slli_epi32(
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + p * kBlocksPerPair))),
          16));
      const uint8_t* v = values + p * kInt8Padding;
      for (int64_t ahead = 0; ahead < kInt8Padding; ahead += 64)  // as nvfp4_int8_dot.cpp: 1 KiB ahead
        _mm_prefetch(reinterpret_cast<const char*>(v + 1024 + ahead), _MM_HINT_T0);
      const __m512i v0 = _mm512_loadu_si512(v), v1 = _mm512_loadu_si512(v + 64), v2 = _mm512_loadu_si512(v + 128),
                    v3 = _mm512_loadu_si512(v + 192);
      for (int r = 0; r < N; ++r) {
        const int8_t* q = x[r]->q.data() + p * kInt8Padding;
        const int32_t* bias = x[r]->int8_weight_bias.data() + p * 2 * kLanes;
        __m512i d0 = _mm512_loadu_si512(bias), d1 = _mm512_loadu_si512(bias + kLanes);
        d0 = _mm512_dpbusd_epi32(d0, v0, _mm512_loadu_si512(q));
        d0 = _mm512_dpbusd_epi32(d0, v1, _mm512_loadu_si512(q + 64));
        d1 = _mm512_dpbusd_epi32(d1, v2, _mm512_loadu_si512(q + 128));
        d1 = _mm512_dpbusd_epi32(d1, v3, _mm512_loadu_si512(q + 192));
        const __m512i block_sums = _mm512_add_epi32(_mm512_permutex2var_epi32(d0, even_lanes, d1),
                                                    _mm512_permutex2var_epi32(d0, odd_lanes, d1));
        const __m512 block_scale = _mm512_mul_ps(t, _mm512_loadu_ps(x[r]->scale.data() + p * kBlocksPerPair));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sums), block_scale, acc[r]);
      }
    }
    for (int r = 0; r < N; ++r) y[r][o] = _mm512_reduce_add_ps(acc[r]) * kUnscale;
  }
}
#pragma GCC diagnostic pop
#endif  // NVFP4LM_X86_INTRINSICS

using RowsFn = void (*)(const Int8Weights&, int64_t, int64_t, const Int8Activations* const*, float* const*);

template <int N>
struct Kernels {
#if NVFP4LM_X86_INTRINSICS
  static constexpr RowsFn scalar = rows_scalar<N>, avx2 = rows_avx2<N>, avx512 = rows_avx512<N>;
#else
  static constexpr RowsFn scalar = rows_scalar<N>, avx2 = scalar, avx512 = scalar;
#endif
};

}  // namespace

Int8Weights quantize_int8_weights(const void* data, bool bf16, int64_t rows, int64_t cols, int64_t ld) {
  NVFP4LM_ASSERT(cols % kBlock == 0 && ld >= cols, "quantize_int8_weights: {} columns (stride {}), not whole blocks",
                 cols, ld);
  Int8Weights w;
  w.rows = rows;
  w.cols = cols;
  w.padded_cols = int8_padded_cols(cols);
  w.values.assign(static_cast<size_t>(rows * w.padded_cols), 128);
  w.scales.assign(static_cast<size_t>(rows * (w.padded_cols / kBlock)), 0);
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < rows; ++o) {
    uint8_t* values = w.values.data() + o * w.padded_cols;
    for (int64_t b = 0; b < cols / kBlock; ++b) {
      float block[kBlock];
      float max_abs = 0.0f;
      bool finite = true;
      for (int i = 0; i < kBlock; ++i) {
        const int64_t at = o * ld + b * kBlock + i;
        block[i] = bf16 ? bf16_to_float(static_cast<const uint16_t*>(data)[at]) : static_cast<const float*>(data)[at];
        finite = finite && std::isfinite(block[i]);
        max_abs = std::max(max_abs, std::abs(block[i]));
      }
      // A non-finite block keeps u = 0 and a NaN scale, so its outputs are NaN, as the BF16 product's would be.
      const uint16_t scale = !finite ? uint16_t{0x7FC0} : bf16_round_up(max_abs / 127.0f);
      w.scales[static_cast<size_t>(o * (w.padded_cols / kBlock) + b)] = scale;
      const float t = bf16_to_float(scale);
      if (!finite || t == 0.0f) continue;
      for (int i = 0; i < kBlock; ++i) {
        const float u = std::clamp(std::nearbyint(block[i] / t), -127.0f, 127.0f);
        values[int8_position(b * kBlock + i)] = static_cast<uint8_t>(u + 128.0f);
      }
    }
  }
  return w;
}

void int8_weight_dot_rows(DotIsa isa, const Int8Weights& w, int64_t first, int64_t last,
                          const Int8Activations* const* x_rows, float* const* y_rows, int n) {
  NVFP4LM_ASSERT(n >= 1 && n <= kDotMaxRows, "int8_weight_dot_rows: {} activation rows (1..{})", n, kDotMaxRows);
  NVFP4LM_ASSERT(int8_dot_isa_supported(isa), "int8_weight_dot_rows: this CPU cannot run the {} variant",
                 int8_dot_isa_name(isa));
  NVFP4LM_ASSERT(first >= 0 && last <= w.rows, "int8_weight_dot_rows: rows [{}, {}) of {}", first, last, w.rows);
  for (int r = 0; r < n; ++r)
    NVFP4LM_ASSERT(x_rows[r]->cols == w.cols, "int8_weight_dot_rows: activations of {} columns for a weight of {}",
                   x_rows[r]->cols, w.cols);
  if (first >= last) return;
  pick_dot_kernel<RowsFn, Kernels>(isa, n)(w, first, last, x_rows, y_rows);
}

}  // namespace nvfp4lm::cpu
