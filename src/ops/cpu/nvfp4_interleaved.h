// NVFP4 weights regrouped 16 output rows at a time, and the CPU decode step's integer kernel on that layout: what
// llama.cpp's CPU "repack" buffers do for Q4_0, here for NVFP4 under CpuMatmul::Int8Activations.
//
// Why: on the row layout (ops/cpu/nvfp4_int8_dot.h) a vpdpbusd lane holds half of one row's block, so every 256
// weights cost two lane-pair shuffles, a bias load per activation row, and every row a horizontal sum at its end.
// Here a 64-byte vector holds 4 code bytes (8 weights) of each of 16 rows, so int32 lane r is row r: the 4 vpdpbusd
// of a block add the block's 16 products per row into the lane, with the block's activations broadcast; the 16
// rows' E4M3 scales are one 16-byte load, and the 16 results leave in one store. Measured on 2 Zen 4 cores reading
// 24 Qwen3-4B gate weights from memory (bench/NOTES.md): 31 instead of 27 GB/s, 92 % of the read bandwidth.
//
// Layout of a weight [rows, cols] (cols a multiple of 16): groups of 16 rows (the last padded with zero rows), each
// group's blocks in order, each block 144 bytes:
//   bytes [0, 64):    code bytes 0..3 of the block (elements 0..7) of rows 0..15, 4 bytes a row;
//   bytes [64, 128):  code bytes 4..7 (elements 8..15) of rows 0..15;
//   bytes [128, 144): the E4M3 scale byte of rows 0..15.
// The codes and scales are the row layout's bytes, moved; every value and the formula of nvfp4_int8_dot.h are the
// same: y = tensor_scale / 2 · Σ_b e4m3_b · s_b · D_b, the integer D_b exact, fp32 products and sums (the order
// differs from the row kernels': two interleaved partial sums over the blocks).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/cpu/dot_rows.h"
#include "ops/cpu/kernel_family.h"
#include "ops/cpu/nvfp4_int8_dot.h"
#include "ops/cpu/views.h"

namespace nvfp4lm::cpu {

inline constexpr int64_t kInterleaveRows = 16;
inline constexpr int64_t kInterleavedBlockBytes = 144;
inline constexpr int64_t kInterleavedHalfBytes = 64;  // one half of a block: 4 code bytes of each of the 16 rows

int64_t interleaved_groups(int64_t rows);  // rows / 16, rounded up
// Bytes of a [rows, cols] weight in this layout.
int64_t interleaved_nvfp4_bytes(int64_t rows, int64_t cols);
// Row layout (codes [rows, cols / 2], scales [rows, cols / 16]) -> `out` (interleaved_nvfp4_bytes of it), with
// OpenMP threads.
void interleave_nvfp4(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, uint8_t* out);
// Rows [16·group, 16·group + count) back in the row layout (count <= 16): codes [count, cols / 2] and scales
// [count, cols / 16], for the prefill's dequantization.
void deinterleave_nvfp4_group(const uint8_t* weight, int64_t cols, int64_t group, int64_t count, uint8_t* codes,
                              uint8_t* scales);

// One activation row quantized for this layout: the values and scales of quantize_int8_block, each block's 16 values
// in the order its code bytes meet them: elements 0 2 4 6 (low nibbles of bytes 0..3), 1 3 5 7 (high nibbles),
// 8 10 12 14, 9 11 13 15.
struct Int8BlockActivations {
  int64_t cols = 0;
  std::vector<int8_t> q;      // [cols], the order above
  std::vector<int32_t> bias;  // [cols / 16]: -12 x the block's Σ q (the codes are offset by +12, as in the row kernel)
  std::vector<float> scale;   // [cols / 16]: 128 · s_b
};
void quantize_int8_blocks(const float* x, int64_t cols, Int8BlockActivations& out);
// Every row of x quantized, into the calling thread's buffers (quantize_rows_per_thread).
inline const std::vector<Int8BlockActivations>& quantize_int8_block_rows(const MatrixF32& x) {
  return quantize_rows_per_thread(x, quantize_int8_blocks);
}

struct Nvfp4Interleaved {
  const uint8_t* data;  // the layout above
  int64_t rows;
  int64_t cols;
  float tensor_scale;
};

// Block `block` of group `group`: its 144 bytes.
inline const uint8_t* interleaved_block_at(const Nvfp4Interleaved& w, int64_t group, int64_t block) {
  return w.data + (group * (w.cols / 16) + block) * kInterleavedBlockBytes;
}

// The kernels: the portable one (the tests' second opinion), AVX-512 VNNI + VBMI (as nvfp4_int8_dot.h's), and on
// AArch64 NEON + I8MM (SMMLA, two activation rows at a time), NEON + SDOT (by element: lane i is row i) and NEON; no
// AVX2 variant: x86 CPUs without AVX-512 VNNI keep the row layout and its AVX2 kernel. Every AArch64 CPU takes this
// layout (its NEON variant runs everywhere).
using InterleavedDotFn = void (*)(const Nvfp4Interleaved&, int64_t, int64_t, const Int8BlockActivations* const*,
                                  float* const*);
using InterleavedDotFamily = KernelFamily<RowKernels<InterleavedDotFn>>;
const InterleavedDotFamily& nvfp4_interleaved_family();
// y_rows[r][o] = the formula above for the weight rows o < rows of groups [first_group, last_group) and the r-th
// quantized row (r < n <= 8), whose cols must equal w.cols.
void nvfp4_interleaved_int8_dot(const InterleavedDotFamily::Variant& variant, const Nvfp4Interleaved& w,
                                int64_t first_group, int64_t last_group, const Int8BlockActivations* const* x_rows,
                                float* const* y_rows, int n);

}  // namespace nvfp4lm::cpu
