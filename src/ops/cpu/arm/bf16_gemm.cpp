// See ../bf16_gemm.h: its NEON + BF16 variant (BFMMLA; the portable tile, which GCC compiles to NEON FMAs on AArch64,
// is in ../bf16_gemm.cpp).
//
// BFMMLA multiplies a 2x4 BF16 matrix by a 4x2 one into 2x2 fp32 sums: here 2 tokens x 4 consecutive k times 2 weight
// rows x the same 4 k. A token's 4 values are two packed pairs (k/2 and k/2 + 1, a stride apart in the packed
// activations): ZIP1 / ZIP2 of 4 tokens' pair k/2 with their pair k/2 + 1 give tokens (0, 1) and (2, 3) in the
// instruction's layout; a weight row's 4 values are contiguous. Lane 2i + j of a sum is (token i, weight row j), so
// a token's two rows are adjacent, as in y. A tile runs 8 tokens at a time against its (up to 6) weight rows: 4 x 3
// sums in registers. An odd number of pairs ends with the second pair zero; an odd number of rows pairs the last
// row with zeros.
//
// Numerics: the products of two BF16 values are exact in fp32, as in every variant, but BFMMLA adds them in its own
// way: with FPCR.EBF = 0 (Linux's default) each step of 2 products is rounded to odd and subnormals are flushed to
// zero (Arm ARM, BFDotAdd). The sums therefore differ from the portable variant's (which rounds each addition to
// nearest even) by a few units in the last place of the running sum per 4 terms — within the family's test bound,
// |y - Σ| <= 1e-6 · Σ|terms| for K up to 160 — and are not bit-identical to it. Where BF16 is absent or capped off
// (NVFP4LM_CPU_ISA=dotprod or lower), the portable tile runs, as NEON FMAs.
#include "ops/cpu/arm/kernels.h"

#if NVFP4LM_ARM_INTRINSICS
#include <cstring>

#include "ops/cpu/bf16_tile.h"

namespace nvfp4lm::cpu::arm {
namespace {

using namespace bf16_tile;

constexpr int kTokensPerStep = 8;  // 4 token pairs

// Rows r and r + 1 of the tile (or r and zeros past the tile's last row), 4 values from pair kp; `pairs_left` 1 reads
// only pair kp (the rest zero), never past the row.
template <int NR>
__attribute__((target("arch=armv8.2-a+bf16"))) inline bfloat16x8_t weight_pair(const Tile& t, int row, int64_t kp,
                                                                               int64_t pairs_left) {
  auto four = [&](int r) -> uint16x4_t {
    if (r >= NR) return vdup_n_u16(0);
    const uint16_t* w = t.w + r * t.ldw + 2 * kp;
    if (pairs_left >= 2) return vld1_u16(w);
    return vreinterpret_u16_u64(vcreate_u64(load_pair(w)));
  };
  return vreinterpretq_bf16_u16(vcombine_u16(four(row), four(row + 1)));
}

template <int NR, int MV>
NVFP4LM_ARM_BF16 void tile_bfmmla(const Tile& t) {
  constexpr int kRowPairs = (NR + 1) / 2;
  const uint32x4_t zero = vdupq_n_u32(0);
  for (int64_t t0 = 0; t0 < t.tokens; t0 += kTokensPerStep) {
    float32x4_t sums[4][kRowPairs];
    for (auto& token_pair : sums)
      for (float32x4_t& s : token_pair) s = vdupq_n_f32(0.0f);
    for (int64_t kp = 0; kp < t.pairs; kp += 2) {
      const int64_t pairs_left = t.pairs - kp;
      const uint32_t* x0 = t.x + kp * t.stride + t0;
      bfloat16x8_t tokens[4];
      for (int h = 0; h < 2; ++h) {
        const uint32x4_t first = vld1q_u32(x0 + 4 * h);
        const uint32x4_t second = pairs_left >= 2 ? vld1q_u32(x0 + t.stride + 4 * h) : zero;
        tokens[2 * h] = vreinterpretq_bf16_u32(vzip1q_u32(first, second));
        tokens[2 * h + 1] = vreinterpretq_bf16_u32(vzip2q_u32(first, second));
      }
      for (int rp = 0; rp < kRowPairs; ++rp) {
        const bfloat16x8_t w = weight_pair<NR>(t, 2 * rp, kp, pairs_left);
        for (int tp = 0; tp < 4; ++tp) sums[tp][rp] = vbfmmlaq_f32(sums[tp][rp], tokens[tp], w);
      }
    }
    for (int tp = 0; tp < 4; ++tp)
      for (int rp = 0; rp < kRowPairs; ++rp) {
        float lane[4];
        vst1q_f32(lane, sums[tp][rp]);
        for (int i = 0; i < 2; ++i) {
          const int64_t token = t0 + 2 * tp + i;
          if (token >= t.tokens) continue;
          for (int j = 0; j < 2 && 2 * rp + j < NR; ++j) t.y[token * t.ldy + 2 * rp + j] = lane[2 * i + j] * t.scale;
        }
      }
  }
}

}  // namespace

Bf16GemmKernels bf16_gemm_bf16() {
  return {tile_kernels([]<int NR, int MV>() { return &tile_bfmmla<NR, MV>; }), dequantize_row_portable};
}

}  // namespace nvfp4lm::cpu::arm
#endif  // NVFP4LM_ARM_INTRINSICS
