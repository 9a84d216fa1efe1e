// See ../bf16_gemm.h: its AVX2 + FMA, AVX-512F and AVX-512 BF16 variants (the portable one is in ../bf16_gemm.cpp).
#include "ops/cpu/x86/kernels.h"

#if NVFP4LM_X86_INTRINSICS
#include <array>
#include <cstring>

#include "ops/cpu/bf16_tile.h"
#include "ops/cpu/nvfp4_dot.h"
#include "ops/cpu/x86/simd.h"
#include "quant/e2m1.h"

namespace nvfp4lm::cpu::x86 {
namespace {

using namespace bf16_tile;

template <int NR, int MV>
__attribute__((target("avx2,fma"))) void tile_avx2(const Tile& t) {
  tile_emulated<NR, MV>(t);
}

template <int NR, int MV>
__attribute__((target("avx512f"))) void tile_avx512(const Tile& t) {
  tile_emulated<NR, MV>(t);
}

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
                                                              uint16_t* out) {
  const std::array<float, 256>& e4m3 = e4m3_value_table();
  std::array<float, 16> values{};
  for (int c = 0; c < 16; ++c) values[static_cast<size_t>(c)] = e2m1_to_float(static_cast<uint8_t>(c));
  const __m512 table = _mm512_loadu_ps(values.data());
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const int64_t blocks = cols / kNvfp4Block;
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + b * (kNvfp4Block / 2)));
    const __m128i low = _mm_and_si128(packed, nibble);
    const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
    store_block_bf16(_mm_unpacklo_epi8(low, high), table, e4m3[scales[b]], out + b * kNvfp4Block);
    store_block_bf16(_mm_unpackhi_epi8(low, high), table, e4m3[scales[b + 1]], out + (b + 1) * kNvfp4Block);
  }
  if (b < blocks) {
    const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + b * (kNvfp4Block / 2)));
    const __m128i low = _mm_and_si128(packed, nibble);
    const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
    store_block_bf16(_mm_unpacklo_epi8(low, high), table, e4m3[scales[b]], out + b * kNvfp4Block);
  }
}

}  // namespace

Bf16GemmKernels bf16_gemm_avx2() {
  return {tile_kernels([]<int NR, int MV>() { return &tile_avx2<NR, MV>; }), dequantize_row_portable};
}
Bf16GemmKernels bf16_gemm_avx512() {
  return {tile_kernels([]<int NR, int MV>() { return &tile_avx512<NR, MV>; }), dequantize_row_avx512};
}
Bf16GemmKernels bf16_gemm_avx512bf16() {
  return {tile_kernels([]<int NR, int MV>() { return &tile_avx512bf16<NR, MV>; }), dequantize_row_avx512};
}

}  // namespace nvfp4lm::cpu::x86
#endif  // NVFP4LM_X86_INTRINSICS
