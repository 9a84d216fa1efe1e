// See ../int8_weight_dot.h: its NEON and NEON + SDOT variants (the portable one is in ../int8_weight_dot.cpp).
//
// The stored values are u + 128 (vpdpbusd's unsigned operand); XOR 0x80 makes them the signed u, which SDOT (or its
// NEON stand-in) multiplies by the activations directly, so the -128·Σq bias is not needed: the block sums D_b are
// the portable kernel's, exactly. A chunk is 4 + 4 vectors (values and activations in the same reordered layout):
// vector v of each half gives int32 lanes 4v..4v+3, pairwise adds the blocks. In fp32 the portable kernel's
// operations in its order: acc_j = fma(D_b, t_b · 128·s_b, acc_j) for block j of each pair of chunks, then the 16
// added left to right, times 1/128. The outputs are the portable variant's bit for bit.
#include "ops/cpu/arm/kernels.h"

#if NVFP4LM_ARM_INTRINSICS

namespace nvfp4lm::cpu::arm {
namespace {

template <typename Dot, int N>
void int8_weight_rows_body(const Int8Weights& w, int64_t first, int64_t last, const Int8Activations* const* x,
                           float* const* y) {
  const uint8x16_t sign = vdupq_n_u8(0x80);
  const int64_t chunks = w.padded_cols / kInt8Chunk, blocks_per_row = w.padded_cols / kNvfp4Block;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* values = w.values.data() + o * w.padded_cols;
    const uint16_t* scales = w.scales.data() + o * blocks_per_row;
    float32x4_t acc[N][4];  // block j of a pair of chunks: acc[j / 4] lane j % 4
    for (int r = 0; r < N; ++r)
      for (float32x4_t& a : acc[r]) a = vdupq_n_f32(0.0f);
    for (int64_t c = 0; c < chunks; ++c) {
      const uint8_t* chunk = values + c * kInt8Chunk;
      int8x16_t u[8];  // [0, 4): the chunk's first 64 values, [4, 8): the second 64
      for (int v = 0; v < 8; ++v) u[v] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(chunk + 16 * v), sign));
      // t_b: BF16 bits as the top half of an fp32.
      const uint16x8_t t_bits = vld1q_u16(scales + c * kInt8BlocksPerChunk);
      const float32x4_t t_low = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(t_bits), 16));
      const float32x4_t t_high = vreinterpretq_f32_u32(vshll_high_n_u16(t_bits, 16));
      const int half = static_cast<int>(c % 2) * 2;
      for (int r = 0; r < N; ++r) {
        const int8_t* q = x[r]->q.data() + c * kInt8Chunk;
        int32x4_t d[4];
        for (int v = 0; v < 4; ++v)
          d[v] = Dot::dot(Dot::dot(vdupq_n_s32(0), u[v], vld1q_s8(q + 16 * v)), u[4 + v], vld1q_s8(q + 64 + 16 * v));
        const float* scale = x[r]->scale.data() + c * kInt8BlocksPerChunk;
        acc[r][half] =
            vfmaq_f32(acc[r][half], vcvtq_f32_s32(vpaddq_s32(d[0], d[1])), vmulq_f32(t_low, vld1q_f32(scale)));
        acc[r][half + 1] =
            vfmaq_f32(acc[r][half + 1], vcvtq_f32_s32(vpaddq_s32(d[2], d[3])), vmulq_f32(t_high, vld1q_f32(scale + 4)));
      }
    }
    for (int r = 0; r < N; ++r) y[r][o] = sum_lanes_in_order(acc[r]) * kInt8WeightUnscale;
  }
}

template <int N>
NVFP4LM_ARM_NEON void int8_weight_rows_neon(const Int8Weights& w, int64_t first, int64_t last,
                                            const Int8Activations* const* x, float* const* y) {
  int8_weight_rows_body<NeonDot, N>(w, first, last, x, y);
}

template <int N>
NVFP4LM_ARM_DOTPROD void int8_weight_rows_dotprod(const Int8Weights& w, int64_t first, int64_t last,
                                                  const Int8Activations* const* x, float* const* y) {
  int8_weight_rows_body<SdotDot, N>(w, first, last, x, y);
}

}  // namespace

RowKernels<Int8WeightDotFn> int8_weight_dot_neon() {
  return row_kernels<Int8WeightDotFn>([]<int N>() { return &int8_weight_rows_neon<N>; });
}
RowKernels<Int8WeightDotFn> int8_weight_dot_dotprod() {
  return row_kernels<Int8WeightDotFn>([]<int N>() { return &int8_weight_rows_dotprod<N>; });
}

}  // namespace nvfp4lm::cpu::arm
#endif  // NVFP4LM_ARM_INTRINSICS
