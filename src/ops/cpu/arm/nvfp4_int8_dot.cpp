// See ../nvfp4_int8_dot.h: its NEON and NEON + SDOT variants (the portable one is in ../nvfp4_int8_dot.cpp).
//
// A chunk's 64 code bytes are four 16-byte vectors; vector v holds code bytes 16v..16v+15, so the dot products of its
// low nibbles with q[16v..16v+15] and of its high nibbles with q[64 + 16v..] give int32 lanes 4v..4v+3 of the row
// layout's 16 (lane L: code bytes 4L..4L+3, half of block L / 2); pairwise adds make the chunk's 8 block sums D_b.
// The codes are looked up as signed 2·e2m1 (TBL), so D_b needs no bias. In fp32, exactly the portable kernel's
// operations in its order: acc_{b mod 16} = fma(D_b, m_b · 128·s_b, acc_{b mod 16}) per block, then the 16
// accumulators added left to right and multiplied by the tensor scale. The outputs are the portable variant's, bit
// for bit.
#include "ops/cpu/arm/kernels.h"

#if NVFP4LM_ARM_INTRINSICS
#include <array>
#include <cstring>

namespace nvfp4lm::cpu::arm {

int8x16_t doubled_e2m1_table() {
  const std::array<int8_t, 16> offset = int8_weight_table();
  int8_t table[16];
  for (int c = 0; c < 16; ++c) table[c] = static_cast<int8_t>(offset[static_cast<size_t>(c)] - kInt8WeightOffset);
  return vld1q_s8(table);
}

namespace {

template <typename Dot, int N>
void int8_dot_rows_body(const Nvfp4Rows& w, int64_t first, int64_t last, const Int8Activations* const* x,
                        float* const* y) {
  const int8x16_t table = doubled_e2m1_table();
  const uint8x16_t nibble = vdupq_n_u8(0x0F);
  const int64_t row_bytes = w.cols / 2, blocks = w.cols / kNvfp4Block;
  const int64_t full_chunks = w.cols / kInt8Chunk, chunks = (w.cols + kInt8Chunk - 1) / kInt8Chunk;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * row_bytes;
    const uint8_t* scales = w.scales + o * blocks;
    float32x4_t acc[N][4];  // blocks 0..15 of a pair of chunks, 4 a vector (the portable kernel's acc[b mod 16])
    for (int r = 0; r < N; ++r)
      for (float32x4_t& a : acc[r]) a = vdupq_n_f32(0.0f);
    for (int64_t c = 0; c < chunks; ++c) {
      uint8_t tail_codes[kInt8ChunkCodeBytes] = {}, tail_scales[kInt8BlocksPerChunk] = {};
      const uint8_t* chunk_codes = codes + c * kInt8ChunkCodeBytes;
      const uint8_t* chunk_scales = scales + c * kInt8BlocksPerChunk;
      if (c == full_chunks) {  // the last, partial chunk: what the row has, zero codes and scales after it
        std::memcpy(tail_codes, chunk_codes, static_cast<size_t>(row_bytes - c * kInt8ChunkCodeBytes));
        std::memcpy(tail_scales, chunk_scales, static_cast<size_t>(blocks - c * kInt8BlocksPerChunk));
        chunk_codes = tail_codes;
        chunk_scales = tail_scales;
      }
      float32x4_t m[2];
      e4m3_over_256(vld1_u8(chunk_scales), m[0], m[1]);
      int8x16_t low[4], high[4];
      for (int v = 0; v < 4; ++v) {
        const uint8x16_t bytes = vld1q_u8(chunk_codes + 16 * v);
        low[v] = vqtbl1q_s8(table, vandq_u8(bytes, nibble));
        high[v] = vqtbl1q_s8(table, vshrq_n_u8(bytes, 4));
      }
      const int half = static_cast<int>(c % 2) * 2;  // acc[half], acc[half + 1]: this chunk's blocks
      for (int r = 0; r < N; ++r) {
        const int8_t* q = x[r]->q.data() + c * kInt8Chunk;
        int32x4_t d[4];
        for (int v = 0; v < 4; ++v)
          d[v] = Dot::dot(Dot::dot(vdupq_n_s32(0), low[v], vld1q_s8(q + 16 * v)), high[v], vld1q_s8(q + 64 + 16 * v));
        const float* scale = x[r]->scale.data() + c * kInt8BlocksPerChunk;
        const int32x4_t blocks_low = vpaddq_s32(d[0], d[1]), blocks_high = vpaddq_s32(d[2], d[3]);
        acc[r][half] = vfmaq_f32(acc[r][half], vcvtq_f32_s32(blocks_low), vmulq_f32(m[0], vld1q_f32(scale)));
        acc[r][half + 1] =
            vfmaq_f32(acc[r][half + 1], vcvtq_f32_s32(blocks_high), vmulq_f32(m[1], vld1q_f32(scale + 4)));
      }
    }
    for (int r = 0; r < N; ++r) y[r][o] = w.tensor_scale * sum_lanes_in_order(acc[r]);
  }
}

template <int N>
NVFP4LM_ARM_NEON void int8_dot_rows_neon(const Nvfp4Rows& w, int64_t first, int64_t last,
                                         const Int8Activations* const* x, float* const* y) {
  int8_dot_rows_body<NeonDot, N>(w, first, last, x, y);
}

template <int N>
NVFP4LM_ARM_DOTPROD void int8_dot_rows_dotprod(const Nvfp4Rows& w, int64_t first, int64_t last,
                                               const Int8Activations* const* x, float* const* y) {
  int8_dot_rows_body<SdotDot, N>(w, first, last, x, y);
}

}  // namespace

RowKernels<Int8DotFn> nvfp4_int8_dot_neon() {
  return row_kernels<Int8DotFn>([]<int N>() { return &int8_dot_rows_neon<N>; });
}
RowKernels<Int8DotFn> nvfp4_int8_dot_dotprod() {
  return row_kernels<Int8DotFn>([]<int N>() { return &int8_dot_rows_dotprod<N>; });
}

}  // namespace nvfp4lm::cpu::arm
#endif  // NVFP4LM_ARM_INTRINSICS
