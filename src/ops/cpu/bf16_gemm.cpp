// See bf16_gemm.h. One tile kernel per variant, instantiated for every tile shape (1..6 weight rows x 1..4 vectors
// of 16 tokens) so the sums live in registers; the emulated variants share one body written with GCC vector types,
// compiled once per target (16 floats lower to one zmm, two ymm or four xmm).
#include "ops/cpu/bf16_gemm.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/numeric.h"
#include "ops/cpu/isa_limit.h"
#include "ops/cpu/simd.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::cpu {
namespace {

constexpr int kTileRows = static_cast<int>(kBf16GemmTileRows);
constexpr int kLanes = 16;       // tokens per vector
constexpr int kTileVectors = 4;  // token vectors per tile
constexpr int kBlock = 16;       // NVFP4 block

using Vec16 = float __attribute__((vector_size(64)));
using Vec16u = uint32_t __attribute__((vector_size(64)));

// A tile: NR weight rows against up to 16 * MV tokens, over all of K.
struct Tile {
  const uint32_t* x;  // packed activations of the tile's first token: pair kp of token t at x[kp * stride + t]
  int64_t stride;     // rows_padded
  int64_t pairs;      // K / 2
  const uint16_t* w;  // first weight row; row r at w + r * ldw
  int64_t ldw;
  float scale;
  float* y;  // output of the tile's first token and first row; token t, row r at y[t * ldy + r]
  int64_t ldy;
  int64_t tokens;  // valid tokens (<= 16 * MV)
};

uint32_t load_pair(const uint16_t* w) {
  uint32_t pair;
  std::memcpy(&pair, w, sizeof pair);
  return pair;
}

template <int NR, int MV>
[[gnu::always_inline]] inline void store_tile(const Vec16 (&sums)[NR][MV], const Tile& t) {
  for (int v = 0; v < MV; ++v) {
    const int64_t count = std::min<int64_t>(kLanes, t.tokens - v * kLanes);
    for (int r = 0; r < NR; ++r) {
      float lane[kLanes];
      std::memcpy(lane, &sums[r][v], sizeof lane);
      for (int64_t l = 0; l < count; ++l) t.y[(v * kLanes + l) * t.ldy + r] = lane[l] * t.scale;
    }
  }
}

// ---- emulated: each pair as two fp32 FMAs (the BF16 product is exact in fp32) --------------------------------------
template <int NR, int MV>
[[gnu::always_inline]] inline void tile_emulated(const Tile& t) {
  Vec16 sums[NR][MV] = {};
  for (int64_t kp = 0; kp < t.pairs; ++kp) {
    const uint32_t* xk = t.x + kp * t.stride;
    float w_even[NR], w_odd[NR];
    for (int r = 0; r < NR; ++r) {
      const uint32_t pair = load_pair(t.w + r * t.ldw + 2 * kp);
      w_even[r] = bits_float(pair << 16);
      w_odd[r] = bits_float(pair & 0xFFFF0000u);
    }
    for (int v = 0; v < MV; ++v) {
      Vec16u packed;
      std::memcpy(&packed, xk + v * kLanes, sizeof packed);
      const Vec16u even_bits = packed << 16, odd_bits = packed & 0xFFFF0000u;
      Vec16 even, odd;
      std::memcpy(&even, &even_bits, sizeof even);
      std::memcpy(&odd, &odd_bits, sizeof odd);
      for (int r = 0; r < NR; ++r) {
        sums[r][v] += even * w_even[r];
        sums[r][v] += odd * w_odd[r];
      }
    }
  }
  store_tile<NR, MV>(sums, t);
}

template <int NR, int MV>
void tile_scalar(const Tile& t) {
  tile_emulated<NR, MV>(t);
}

#if NVFP4LM_X86_INTRINSICS
template <int NR, int MV>
__attribute__((target("avx2,fma"))) void tile_avx2(const Tile& t) {
  tile_emulated<NR, MV>(t);
}

template <int NR, int MV>
__attribute__((target("avx512f"))) void tile_avx512(const Tile& t) {
  tile_emulated<NR, MV>(t);
}

// GCC 12 starts some AVX-512 conversions from _mm512_undefined_*() and then warns (a false positive, PR 105593).
#pragma GCC diagnostic push
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <int NR, int MV>
__attribute__((target("avx512f,avx512bf16"))) void tile_avx512bf16(const Tile& t) {
  __m512 sums[NR][MV];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < MV; ++v) sums[r][v] = _mm512_setzero_ps();
  for (int64_t kp = 0; kp < t.pairs; ++kp) {
    const uint32_t* xk = t.x + kp * t.stride;
    __m512i x[MV];
    for (int v = 0; v < MV; ++v) x[v] = _mm512_loadu_si512(xk + v * kLanes);
    for (int r = 0; r < NR; ++r) {
      const __m512i w = _mm512_set1_epi32(static_cast<int>(load_pair(t.w + r * t.ldw + 2 * kp)));
      for (int v = 0; v < MV; ++v) sums[r][v] = _mm512_dpbf16_ps(sums[r][v], (__m512bh)x[v], (__m512bh)w);
    }
  }
  Vec16 out[NR][MV];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < MV; ++v) std::memcpy(&out[r][v], &sums[r][v], sizeof(Vec16));
  store_tile<NR, MV>(out, t);
}

// 16 codes (in element order, one per byte) times `scale` as BF16 at dst: the product is exact, so its top 16 bits
// are its BF16.
__attribute__((target("avx512f"))) inline void store_block_bf16(__m128i ordered, __m512 table, float scale,
                                                                uint16_t* dst) {
  const __m512 v = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(ordered), table), _mm512_set1_ps(scale));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)));
}

// One NVFP4 row to BF16, two blocks (16 code bytes) per step: nibbles in element order, one vpermps from the E2M1
// table per block, times the block's E4M3 value.
__attribute__((target("avx512f"))) void dequantize_row_avx512(const uint8_t* codes, const uint8_t* scales, int64_t cols,
                                                              uint16_t* out, const std::array<float, 256>& e4m3) {
  std::array<float, 16> values{};
  for (int c = 0; c < 16; ++c) values[static_cast<size_t>(c)] = e2m1_to_float(static_cast<uint8_t>(c));
  const __m512 table = _mm512_loadu_ps(values.data());
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const int64_t blocks = cols / kBlock;
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + b * (kBlock / 2)));
    const __m128i low = _mm_and_si128(packed, nibble);
    const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
    store_block_bf16(_mm_unpacklo_epi8(low, high), table, e4m3[scales[b]], out + b * kBlock);
    store_block_bf16(_mm_unpackhi_epi8(low, high), table, e4m3[scales[b + 1]], out + (b + 1) * kBlock);
  }
  if (b < blocks) {
    const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + b * (kBlock / 2)));
    const __m128i low = _mm_and_si128(packed, nibble);
    const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
    store_block_bf16(_mm_unpacklo_epi8(low, high), table, e4m3[scales[b]], out + b * kBlock);
  }
}
#pragma GCC diagnostic pop
#endif  // NVFP4LM_X86_INTRINSICS

using TileFn = void (*)(const Tile&);

// The kernel of `Kernel` for nr rows and mv vectors.
template <template <int, int> class Kernel, int... I>
TileFn pick_tile(int nr, int mv, std::integer_sequence<int, I...>) {
  TileFn fn = nullptr;
  // I enumerates the shapes: rows I / kTileVectors + 1, vectors I % kTileVectors + 1.
  ((nr == I / kTileVectors + 1 && mv == I % kTileVectors + 1
        ? (fn = &Kernel<I / kTileVectors + 1, I % kTileVectors + 1>::run, 0)
        : 0),
   ...);
  return fn;
}

template <template <int, int> class Kernel>
TileFn pick_tile(int nr, int mv) {
  return pick_tile<Kernel>(nr, mv, std::make_integer_sequence<int, kTileRows * kTileVectors>{});
}

template <int NR, int MV>
struct Scalar {
  static void run(const Tile& t) { tile_scalar<NR, MV>(t); }
};
#if NVFP4LM_X86_INTRINSICS
template <int NR, int MV>
struct Avx2 {
  static void run(const Tile& t) { tile_avx2<NR, MV>(t); }
};
template <int NR, int MV>
struct Avx512 {
  static void run(const Tile& t) { tile_avx512<NR, MV>(t); }
};
template <int NR, int MV>
struct Avx512Bf16 {
  static void run(const Tile& t) { tile_avx512bf16<NR, MV>(t); }
};
#endif

TileFn tile_kernel(Bf16Isa isa, int nr, int mv) {
#if NVFP4LM_X86_INTRINSICS
  if (isa == Bf16Isa::Avx512Bf16) return pick_tile<Avx512Bf16>(nr, mv);
  if (isa == Bf16Isa::Avx512) return pick_tile<Avx512>(nr, mv);
  if (isa == Bf16Isa::Avx2) return pick_tile<Avx2>(nr, mv);
#endif
  return pick_tile<Scalar>(nr, mv);
}

const std::array<float, 256>& e4m3_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> values{};
    for (int s = 0; s < 256; ++s) values[static_cast<size_t>(s)] = e4m3_to_float(static_cast<uint8_t>(s));
    return values;
  }();
  return table;
}

}  // namespace

const char* bf16_isa_name(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::Scalar:
      return "scalar";
    case Bf16Isa::Avx2:
      return "avx2+fma";
    case Bf16Isa::Avx512:
      return "avx512f";
    case Bf16Isa::Avx512Bf16:
      return "avx512bf16";
  }
  return "?";
}

bool bf16_isa_supported(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::Scalar:
      return true;
#if NVFP4LM_X86_INTRINSICS
    case Bf16Isa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Bf16Isa::Avx512:
      return __builtin_cpu_supports("avx512f");
    case Bf16Isa::Avx512Bf16:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    case Bf16Isa::Avx2:
    case Bf16Isa::Avx512:
    case Bf16Isa::Avx512Bf16:
      return false;
#endif
  }
  return false;
}

std::vector<Bf16Isa> supported_bf16_isas() {
  std::vector<Bf16Isa> isas;
  for (Bf16Isa isa : {Bf16Isa::Scalar, Bf16Isa::Avx2, Bf16Isa::Avx512, Bf16Isa::Avx512Bf16})
    if (bf16_isa_supported(isa)) isas.push_back(isa);
  return isas;
}

Bf16Isa best_bf16_isa() {
  static const Bf16Isa best = widest_allowed(supported_bf16_isas(), [](Bf16Isa isa) {
    switch (isa) {
      case Bf16Isa::Avx512Bf16:
        return IsaLevel::Avx512All;
      case Bf16Isa::Avx512:
        return IsaLevel::Avx512F;
      case Bf16Isa::Avx2:
        return IsaLevel::Avx2;
      case Bf16Isa::Scalar:
        break;
    }
    return IsaLevel::Scalar;
  });
  return best;
}

void pack_activations(const float* x, int64_t ldx, int64_t rows, int64_t cols, PackedActivations& out) {
  NVFP4LM_ASSERT(cols % 2 == 0 && rows >= 0, "pack_activations: {} x {} (columns must be even)", rows, cols);
  out.rows = rows;
  out.rows_padded = (rows + kLanes - 1) / kLanes * kLanes;
  out.cols = cols;
  const int64_t pairs = cols / 2;
  out.pairs.resize(static_cast<size_t>(pairs * out.rows_padded));
  uint32_t* dst = out.pairs.data();
  // 16 tokens at a time: each pair index writes one 64-byte line.
  for (int64_t m0 = 0; m0 < out.rows_padded; m0 += kLanes) {
    for (int64_t kp = 0; kp < pairs; ++kp) {
      uint32_t* line = dst + kp * out.rows_padded + m0;
      for (int64_t l = 0; l < kLanes; ++l) {
        const int64_t m = m0 + l;
        if (m >= rows) {
          line[l] = 0;
          continue;
        }
        const float* xm = x + m * ldx + 2 * kp;
        line[l] = static_cast<uint32_t>(float_to_bf16(xm[0])) | (static_cast<uint32_t>(float_to_bf16(xm[1])) << 16);
      }
    }
  }
}

void bf16_gemm(Bf16Isa isa, const PackedActivations& x, const uint16_t* w, int64_t ldw, int64_t n_rows, float scale,
               float* y, int64_t ldy) {
  NVFP4LM_ASSERT(bf16_isa_supported(isa), "bf16_gemm: this CPU cannot run the {} variant", bf16_isa_name(isa));
  const int64_t tile_tokens = kLanes * kTileVectors;
  for (int64_t n0 = 0; n0 < n_rows; n0 += kTileRows) {
    const auto nr = static_cast<int>(std::min<int64_t>(kTileRows, n_rows - n0));
    for (int64_t m0 = 0; m0 < x.rows; m0 += tile_tokens) {
      const int64_t tokens = std::min(tile_tokens, x.rows - m0);
      const auto mv = static_cast<int>((tokens + kLanes - 1) / kLanes);
      const Tile tile{x.pairs.data() + m0, x.rows_padded, x.cols / 2, w + n0 * ldw, ldw, scale,
                      y + m0 * ldy + n0,   ldy,           tokens};
      tile_kernel(isa, nr, mv)(tile);
    }
  }
}

void dequantize_nvfp4_row_bf16(Bf16Isa isa, const uint8_t* codes, const uint8_t* scales, int64_t cols, uint16_t* out) {
  NVFP4LM_ASSERT(cols % kBlock == 0, "dequantize_nvfp4_row_bf16: {} columns", cols);
  const std::array<float, 256>& e4m3 = e4m3_values();
#if NVFP4LM_X86_INTRINSICS
  if (isa == Bf16Isa::Avx512 || isa == Bf16Isa::Avx512Bf16) {
    dequantize_row_avx512(codes, scales, cols, out, e4m3);
    return;
  }
#else
  (void)isa;
#endif
  for (int64_t b = 0; b < cols / kBlock; ++b) {
    const float scale = e4m3[scales[b]];
    for (int i = 0; i < kBlock / 2; ++i) {
      const uint8_t byte = codes[b * (kBlock / 2) + i];
      out[b * kBlock + 2 * i] = static_cast<uint16_t>(float_bits(e2m1_to_float(byte & 0xF) * scale) >> 16);
      out[b * kBlock + 2 * i + 1] = static_cast<uint16_t>(float_bits(e2m1_to_float(byte >> 4) * scale) >> 16);
    }
  }
}

}  // namespace nvfp4lm::cpu
