// See nvfp4_dot.h. Three variants of one loop nest: per weight row, per 16-element block, decode the 16 codes to
// floats, multiply by the block multiplier, and fused-multiply-add against each of the n activation rows (n is a
// template parameter so the n accumulators live in registers). The x86 variants are compiled with target
// attributes and chosen at run time, so a portable build still uses the wide units of the CPU it runs on.
#include "ops/cpu/nvfp4_dot.h"

#include <array>
#include <cstring>

#include "core/error.h"
#include "ops/cpu/isa_limit.h"
#include "ops/cpu/simd.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::cpu {
namespace {

constexpr int kBlock = 16;

// The block multiplier of every scale byte for this tensor scale: nvfp4_dequant_scale itself, tabulated.
std::array<float, 256> multiplier_table(float tensor_scale) {
  std::array<float, 256> table{};
  for (int s = 0; s < 256; ++s)
    table[static_cast<size_t>(s)] = nvfp4_dequant_scale(static_cast<uint8_t>(s), tensor_scale);
  return table;
}

std::array<float, 16> e2m1_table() {
  std::array<float, 16> table{};
  for (int c = 0; c < 16; ++c) table[static_cast<size_t>(c)] = e2m1_to_float(static_cast<uint8_t>(c));
  return table;
}

// ---- scalar: table lookups, 16 fixed lanes per row (the compiler vectorizes the lane loop) ----------------------
template <int N>
void rows_scalar(const Nvfp4Rows& w, int64_t first, int64_t last, const float* const* x, float* const* y) {
  const std::array<float, 256> multiplier = multiplier_table(w.tensor_scale);
  const std::array<float, 16> values = e2m1_table();
  const int64_t blocks = w.cols / kBlock;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * (w.cols / 2);
    const uint8_t* scales = w.scales + o * blocks;
    float lanes[N][kBlock] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      const float m = multiplier[scales[b]];
      float weight[kBlock];
      for (int i = 0; i < kBlock / 2; ++i) {
        const uint8_t byte = codes[b * (kBlock / 2) + i];
        weight[2 * i] = values[byte & 0xF] * m;
        weight[2 * i + 1] = values[byte >> 4] * m;
      }
      for (int r = 0; r < N; ++r) {
        const float* xb = x[r] + b * kBlock;
        for (int i = 0; i < kBlock; ++i) lanes[r][i] += weight[i] * xb[i];
      }
    }
    for (int r = 0; r < N; ++r) {
      float sum = 0.f;
      for (float lane : lanes[r]) sum += lane;
      y[r][o] = sum;
    }
  }
}

#if NVFP4LM_X86_INTRINSICS
// GCC 12's intrinsic headers start some AVX-512 conversions from _mm512_undefined_*() and then warn about it
// (-Wmaybe-uninitialized, a known false positive, GCC PR 105593; clang has no such warning); the values are fully
// written.
#pragma GCC diagnostic push
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// ---- AVX2 + FMA: 8 lanes; the 8 magnitudes by vpermps, the sign (code bit 3) moved to bit 31 and xored in -------
__attribute__((target("avx2,fma"))) inline __m256 avx2_values(__m128i codes8, __m256 magnitudes) {
  const __m256i index = _mm256_cvtepu8_epi32(codes8);
  const __m256 magnitude = _mm256_permutevar8x32_ps(magnitudes, index);  // low 3 bits pick
  const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(index, 28), _mm256_set1_epi32(INT32_MIN));
  return _mm256_xor_ps(magnitude, _mm256_castsi256_ps(sign));
}

template <int N>
__attribute__((target("avx2,fma"))) void rows_avx2(const Nvfp4Rows& w, int64_t first, int64_t last,
                                                   const float* const* x, float* const* y) {
  const std::array<float, 256> multiplier = multiplier_table(w.tensor_scale);
  const std::array<float, 16> values = e2m1_table();
  const __m256 magnitudes = _mm256_loadu_ps(values.data());  // codes 0..7
  const __m128i low_nibbles = _mm_set1_epi8(0x0F);
  const int64_t blocks = w.cols / kBlock;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * (w.cols / 2);
    const uint8_t* scales = w.scales + o * blocks;
    __m256 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + b * (kBlock / 2)));
      const __m128i low = _mm_and_si128(packed, low_nibbles);
      const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), low_nibbles);
      const __m128i ordered = _mm_unpacklo_epi8(low, high);  // codes of elements 0..15 in order
      const __m256 m = _mm256_set1_ps(multiplier[scales[b]]);
      const __m256 w0 = _mm256_mul_ps(avx2_values(ordered, magnitudes), m);
      const __m256 w1 = _mm256_mul_ps(avx2_values(_mm_srli_si128(ordered, 8), magnitudes), m);
      for (int r = 0; r < N; ++r) {
        const float* xb = x[r] + b * kBlock;
        acc[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xb), acc[r]);
        acc[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xb + 8), acc[r]);
      }
    }
    for (int r = 0; r < N; ++r) y[r][o] = avx2_lane_sum(acc[r]);
  }
}

// ---- AVX-512F: 16 lanes = one block; the 16 signed values by one vpermps ----------------------------------------
template <int N>
__attribute__((target("avx512f"))) void rows_avx512(const Nvfp4Rows& w, int64_t first, int64_t last,
                                                    const float* const* x, float* const* y) {
  const std::array<float, 256> multiplier = multiplier_table(w.tensor_scale);
  const std::array<float, 16> values = e2m1_table();
  const __m512 table = _mm512_loadu_ps(values.data());
  const __m128i low_nibbles = _mm_set1_epi8(0x0F);
  const int64_t blocks = w.cols / kBlock;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * (w.cols / 2);
    const uint8_t* scales = w.scales + o * blocks;
    __m512 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {  // two blocks from one 16-byte load
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + b * (kBlock / 2)));
      const __m128i low = _mm_and_si128(packed, low_nibbles);
      const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), low_nibbles);
      const __m512 w0 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(low, high)), table),
                                      _mm512_set1_ps(multiplier[scales[b]]));
      const __m512 w1 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(low, high)), table),
                                      _mm512_set1_ps(multiplier[scales[b + 1]]));
      for (int r = 0; r < N; ++r) {
        const float* xb = x[r] + b * kBlock;
        acc[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xb), acc[r]);
        acc[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xb + kBlock), acc[r]);
      }
    }
    if (b < blocks) {  // an odd last block
      const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + b * (kBlock / 2)));
      const __m128i low = _mm_and_si128(packed, low_nibbles);
      const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), low_nibbles);
      const __m512 w0 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(low, high)), table),
                                      _mm512_set1_ps(multiplier[scales[b]]));
      for (int r = 0; r < N; ++r) acc[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[r] + b * kBlock), acc[r]);
    }
    for (int r = 0; r < N; ++r) y[r][o] = _mm512_reduce_add_ps(acc[r]);
  }
}
#pragma GCC diagnostic pop
#endif  // NVFP4LM_X86_INTRINSICS

using RowsFn = void (*)(const Nvfp4Rows&, int64_t, int64_t, const float* const*, float* const*);

template <int N>
struct Kernels {
#if NVFP4LM_X86_INTRINSICS
  static constexpr RowsFn scalar = rows_scalar<N>, avx2 = rows_avx2<N>, avx512 = rows_avx512<N>;
#else
  static constexpr RowsFn scalar = rows_scalar<N>, avx2 = scalar, avx512 = scalar;
#endif
};

}  // namespace

const char* dot_isa_name(DotIsa isa) {
  switch (isa) {
    case DotIsa::Scalar:
      return "scalar";
    case DotIsa::Avx2:
      return "avx2+fma";
    case DotIsa::Avx512:
      return "avx512f";
  }
  return "?";
}

bool dot_isa_supported(DotIsa isa) {
  switch (isa) {
    case DotIsa::Scalar:
      return true;
#if NVFP4LM_X86_INTRINSICS
    case DotIsa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case DotIsa::Avx512:
      return __builtin_cpu_supports("avx512f");
#else
    case DotIsa::Avx2:
    case DotIsa::Avx512:
      return false;
#endif
  }
  return false;
}

std::vector<DotIsa> dot_isas_where(bool (*supported)(DotIsa)) {
  std::vector<DotIsa> isas;
  for (DotIsa isa : {DotIsa::Scalar, DotIsa::Avx2, DotIsa::Avx512})
    if (supported(isa)) isas.push_back(isa);
  return isas;
}

std::vector<DotIsa> supported_dot_isas() { return dot_isas_where(dot_isa_supported); }

DotIsa best_nvfp4_dot_isa() {
  static const DotIsa best = widest_allowed(supported_dot_isas(), [](DotIsa isa) {
    return isa == DotIsa::Avx512 ? IsaLevel::Avx512F : isa == DotIsa::Avx2 ? IsaLevel::Avx2 : IsaLevel::Scalar;
  });
  return best;
}

void nvfp4_dot_rows(DotIsa isa, const Nvfp4Rows& w, int64_t first, int64_t last, const float* const* x_rows,
                    float* const* y_rows, int n) {
  NVFP4LM_ASSERT(n >= 1 && n <= kDotMaxRows, "nvfp4_dot_rows: {} activation rows (1..{})", n, kDotMaxRows);
  NVFP4LM_ASSERT(w.cols % kBlock == 0, "nvfp4_dot_rows: {} columns is not a multiple of {}", w.cols, kBlock);
  NVFP4LM_ASSERT(dot_isa_supported(isa), "nvfp4_dot_rows: this CPU cannot run the {} variant", dot_isa_name(isa));
  if (first >= last) return;
  pick_dot_kernel<RowsFn, Kernels>(isa, n)(w, first, last, x_rows, y_rows);
}

}  // namespace nvfp4lm::cpu
