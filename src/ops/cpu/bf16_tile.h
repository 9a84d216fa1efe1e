// The tile of ops/cpu/bf16_gemm.h's micro-kernels, shared by the portable variant (../bf16_gemm.cpp) and the x86 ones
// (x86/bf16_gemm.cpp): its operands, the store of its sums, and the body the emulated variants compile per target
// (GCC vector types: 16 floats lower to one zmm, two ymm or four xmm).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/numeric.h"
#include "ops/cpu/bf16_gemm.h"

namespace nvfp4lm::cpu::bf16_tile {

inline constexpr int kTileRows = static_cast<int>(kBf16GemmTileRows);
inline constexpr int kLanes = 16;       // tokens per vector
inline constexpr int kTileVectors = 4;  // token vectors per tile

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

inline uint32_t load_pair(const uint16_t* w) {
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

using TileFn = void (*)(const Tile&);

// The kernel table of a tile template over its shapes (NR rows 1..6, MV vectors 1..4):
// tile_kernels([]<int NR, int MV>() { return &tile_avx2<NR, MV>; }).
template <typename Make>
std::array<TileFn, kBf16TileShapes> tile_kernels(Make make) {
  return [&]<int... I>(std::integer_sequence<int, I...>) {
    return std::array<TileFn, kBf16TileShapes>{
        make.template operator()<I / kTileVectors + 1, I % kTileVectors + 1>()...};
  }
  (std::make_integer_sequence<int, kBf16TileShapes>{});
}

// The E4M3 value of every scale byte.
const std::array<float, 256>& e4m3_value_table();
// One NVFP4 row to BF16 in portable code (dequantize_nvfp4_row_bf16's loop for the variants without a vector one).
void dequantize_row_portable(const uint8_t* codes, const uint8_t* scales, int64_t cols, uint16_t* out);

}  // namespace nvfp4lm::cpu::bf16_tile
