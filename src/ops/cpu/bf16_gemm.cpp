// See bf16_gemm.h. One tile kernel per variant, instantiated for every tile shape (1..6 weight rows x 1..4 vectors
// of 16 tokens) so the sums live in registers. Here: the portable variant (the emulated tile of ops/cpu/bf16_tile.h
// at the baseline ISA), the family's table, packing and the entry points; the x86 variants are in
// ops/cpu/x86/bf16_gemm.cpp.
#include "ops/cpu/bf16_gemm.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/numeric.h"
#include "ops/cpu/arm/kernels.h"
#include "ops/cpu/bf16_tile.h"
#include "ops/cpu/nvfp4_dot.h"
#include "ops/cpu/x86/kernels.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::cpu {
namespace {

using namespace bf16_tile;

template <int NR, int MV>
void tile_scalar(const Tile& t) {
  tile_emulated<NR, MV>(t);
}

std::vector<Bf16GemmFamily::Variant> bf16_gemm_variants() {
  std::vector<Bf16GemmFamily::Variant> variants;  // fastest first
#if NVFP4LM_X86_INTRINSICS
  variants.push_back({&kAvx512Bf16Isa, x86::bf16_gemm_avx512bf16()});
  variants.push_back({&kAvx512FIsa, x86::bf16_gemm_avx512()});
  variants.push_back({&kAvx2Isa, x86::bf16_gemm_avx2()});
#endif
#if NVFP4LM_ARM_INTRINSICS
  variants.push_back({&kNeonBf16Isa, arm::bf16_gemm_bf16()});
#endif
  variants.push_back(
      {&kScalarIsa, {tile_kernels([]<int NR, int MV>() { return &tile_scalar<NR, MV>; }), dequantize_row_portable}});
  return variants;
}

}  // namespace

namespace bf16_tile {

const std::array<float, 256>& e4m3_value_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> values{};
    for (int s = 0; s < 256; ++s) values[static_cast<size_t>(s)] = e4m3_to_float(static_cast<uint8_t>(s));
    return values;
  }();
  return table;
}

void dequantize_row_portable(const uint8_t* codes, const uint8_t* scales, int64_t cols, uint16_t* out) {
  const std::array<float, 256>& e4m3 = e4m3_value_table();
  for (int64_t b = 0; b < cols / kNvfp4Block; ++b) {
    const float scale = e4m3[scales[b]];
    for (int i = 0; i < kNvfp4Block / 2; ++i) {
      const uint8_t byte = codes[b * (kNvfp4Block / 2) + i];
      out[b * kNvfp4Block + 2 * i] = static_cast<uint16_t>(float_bits(e2m1_to_float(byte & 0xF) * scale) >> 16);
      out[b * kNvfp4Block + 2 * i + 1] = static_cast<uint16_t>(float_bits(e2m1_to_float(byte >> 4) * scale) >> 16);
    }
  }
}

}  // namespace bf16_tile

const Bf16GemmFamily& bf16_gemm_family() {
  static const Bf16GemmFamily family("bf16 gemm", bf16_gemm_variants());
  return family;
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

void bf16_gemm(const Bf16GemmFamily::Variant& variant, const PackedActivations& x, const uint16_t* w, int64_t ldw,
               int64_t n_rows, float scale, float* y, int64_t ldy) {
  bf16_gemm_family().check_runnable(variant);
  const int64_t tile_tokens = kLanes * kTileVectors;
  for (int64_t n0 = 0; n0 < n_rows; n0 += kTileRows) {
    const auto nr = static_cast<int>(std::min<int64_t>(kTileRows, n_rows - n0));
    for (int64_t m0 = 0; m0 < x.rows; m0 += tile_tokens) {
      const int64_t tokens = std::min(tile_tokens, x.rows - m0);
      const auto mv = static_cast<int>((tokens + kLanes - 1) / kLanes);
      const Tile tile{x.pairs.data() + m0, x.rows_padded, x.cols / 2, w + n0 * ldw, ldw, scale,
                      y + m0 * ldy + n0,   ldy,           tokens};
      variant.kernels.tiles[static_cast<size_t>((nr - 1) * kTileVectors + mv - 1)](tile);
    }
  }
}

void dequantize_nvfp4_row_bf16(const Bf16GemmFamily::Variant& variant, const uint8_t* codes, const uint8_t* scales,
                               int64_t cols, uint16_t* out) {
  NVFP4LM_ASSERT(cols % kNvfp4Block == 0, "dequantize_nvfp4_row_bf16: {} columns", cols);
  bf16_gemm_family().check_runnable(variant);
  variant.kernels.dequantize_row(codes, scales, cols, out);
}

}  // namespace nvfp4lm::cpu
