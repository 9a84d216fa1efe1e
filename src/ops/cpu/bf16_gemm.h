// The matrix product of the CPU's fast path (cpu/nvfp4-bf16) for many activation rows (prefill): BF16 activations
// times BF16 weight rows, fp32 accumulation, one scale applied to the sums:
//   y[m][n] = scale * Σ_k bf16(x[m][k]) * w[n][k]
// The weights are NVFP4 rows dequantized a few at a time into BF16 in cache (code * E4M3 scale is exact in BF16;
// the tensor scale is the `scale` applied at the end) or the BF16 embedding / lm_head as it is stored; no fp32
// weight matrix is ever formed. Products of two BF16 values are exact in fp32, so every variant computes the same
// terms and they differ only in fp32 summation order.
//
// Layout: activations are packed once per call (pack_activations) as BF16 pairs (k, k+1) in one u32, transposed to
// [K/2][Mp] (Mp = M rounded up to 16, zero padded), so one vector holds 16 tokens' pair k/2 and a weight pair is
// broadcast to it. The micro-kernel keeps 6 weight rows x 64 tokens of fp32 sums in registers.
//
// Variants (bf16_gemm_family(), chosen at run time; tests run each this CPU has; the x86 ones in ops/cpu/x86/):
//   avx512bf16  vdpbf16ps: two products and their sum per fp32 lane per instruction (twice the FMA rate);
//   avx512f     the same products with two fp32 FMAs on 16 lanes;
//   avx2        the same on 8 lanes (AVX2 + FMA);
//   neon+bf16   BFMMLA (AArch64): 2 tokens x 4 k x 2 weight rows per instruction, its own rounding of the sums
//               (ops/cpu/arm/bf16_gemm.cpp states it);
//   scalar      portable code the compiler vectorises for the baseline ISA (NEON FMAs on AArch64).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ops/cpu/kernel_family.h"

namespace nvfp4lm::cpu {

// Weight rows per micro-kernel tile: callers that split the rows among threads split on multiples of it.
inline constexpr int64_t kBf16GemmTileRows = 6;
// Tile shapes: 1..6 weight rows x 1..4 vectors of 16 tokens.
inline constexpr int kBf16TileShapes = 6 * 4;

namespace bf16_tile {
struct Tile;  // ops/cpu/bf16_tile.h
}
struct Bf16GemmKernels {
  std::array<void (*)(const bf16_tile::Tile&), kBf16TileShapes> tiles;  // [(rows - 1) * 4 + vectors - 1]
  void (*dequantize_row)(const uint8_t* codes, const uint8_t* scales, int64_t cols, uint16_t* out);
};
using Bf16GemmFamily = KernelFamily<Bf16GemmKernels>;
const Bf16GemmFamily& bf16_gemm_family();  // avx512bf16, avx512f, avx2+fma, neon+bf16, scalar

// Activations as the kernels read them (see above). rows <= rows_padded; cols even.
struct PackedActivations {
  std::vector<uint32_t> pairs;  // [cols / 2][rows_padded]
  int64_t rows = 0;
  int64_t rows_padded = 0;
  int64_t cols = 0;
};

// Packs `rows` rows of `cols` (even) floats, row r at x + r * ldx, rounding each to BF16 (nearest even).
void pack_activations(const float* x, int64_t ldx, int64_t rows, int64_t cols, PackedActivations& out);

// y[m][n] = scale * Σ_k x[m][k] * w[n][k] for m < x.rows and n < n_rows, weight row n at w + n * ldw (BF16 bits,
// x.cols of them), output row m at y + m * ldy (n_rows floats written from y + m * ldy).
void bf16_gemm(const Bf16GemmFamily::Variant& variant, const PackedActivations& x, const uint16_t* w, int64_t ldw,
               int64_t n_rows, float scale, float* y, int64_t ldy);

// One NVFP4 row (cols a multiple of 16) as BF16: e2m1(code) * e4m3(scale byte), exact; the tensor scale is not
// applied. The AVX-512 variants vectorise it, the others run the portable loop; the values are the same.
void dequantize_nvfp4_row_bf16(const Bf16GemmFamily::Variant& variant, const uint8_t* codes, const uint8_t* scales,
                               int64_t cols, uint16_t* out);

}  // namespace nvfp4lm::cpu
