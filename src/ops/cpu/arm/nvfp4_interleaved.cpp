// See ../nvfp4_interleaved.h: its NEON, NEON + SDOT and NEON + I8MM variants (the portable one is in
// ../nvfp4_interleaved.cpp).
//
// A block of a 16-row group is 128 code bytes: half 0 (bytes 0..3 of each row) in 4 vectors of 4 rows each, then
// half 1 (bytes 4..7). Looked up as signed 2·e2m1 (TBL), a vector's low nibbles meet activations 0..3 of the
// block's Int8BlockActivations order and its high nibbles 4..7 (half 1: 8..11 and 12..15), the same 4 for every row:
// SDOT by element multiplies each row's 4 bytes by those 4 broadcast activations, so int32 lane i of vector v is
// row 4v + i. With I8MM, SMMLA multiplies 2 rows x 8 weights by 2 activation rows x 8 values: zipping a vector's
// looked-up low and high nibbles gives rows (4v, 4v+1) and (4v+2, 4v+3) with their 8 weights in activation order,
// so two SMMLA a row pair and half give 2 rows x 2 activation rows of D_b.
// The integer sums are exact; in fp32 every variant does the portable kernel's operations in its order: per row,
// acc_{b mod 2} = fma(D_b, m_row · 128·s_b, acc_{b mod 2}), then (acc_0 + acc_1) · tensor_scale. The outputs are the
// portable variant's bit for bit.
#include "ops/cpu/arm/kernels.h"

#if NVFP4LM_ARM_INTRINSICS
#include <algorithm>
#include <cstring>

namespace nvfp4lm::cpu::arm {
namespace {

// The 128 code bytes of a block as signed weights: [half][vector] of low and high nibbles.
struct BlockWeights {
  int8x16_t low[2][4], high[2][4];
};

inline BlockWeights look_up(const uint8_t* block, int8x16_t table) {
  const uint8x16_t nibble = vdupq_n_u8(0x0F);
  BlockWeights out;
  for (int half = 0; half < 2; ++half)
    for (int v = 0; v < 4; ++v) {
      const uint8x16_t bytes = vld1q_u8(block + half * kInterleavedHalfBytes + 16 * v);
      out.low[half][v] = vqtbl1q_s8(table, vandq_u8(bytes, nibble));
      out.high[half][v] = vqtbl1q_s8(table, vshrq_n_u8(bytes, 4));
    }
  return out;
}

// The 16 rows' m = e4m3 / 256, 4 rows a vector.
inline void row_scales(const uint8_t* block, float32x4_t (&m)[4]) {
  const uint8x16_t bytes = vld1q_u8(block + 2 * kInterleavedHalfBytes);
  e4m3_over_256(vget_low_u8(bytes), m[0], m[1]);
  e4m3_over_256(vget_high_u8(bytes), m[2], m[3]);
}

// (acc_0 + acc_1) · tensor_scale of the group's rows that exist, into y.
inline void store_rows(const float32x4_t (&acc)[2][4], float tensor_scale, int64_t count, float* y) {
  float out[16];
  for (int v = 0; v < 4; ++v)
    vst1q_f32(out + 4 * v, vmulq_f32(vaddq_f32(acc[0][v], acc[1][v]), vdupq_n_f32(tensor_scale)));
  std::memcpy(y, out, static_cast<size_t>(count) * sizeof(float));
}

// ---- NEON and NEON + SDOT: per activation row, 16 dot products by element a block ------------------------------
template <typename Dot, int N>
void interleaved_body(const Nvfp4Interleaved& w, int64_t first, int64_t last, const Int8BlockActivations* const* x,
                      float* const* y) {
  const int8x16_t table = doubled_e2m1_table();
  const int64_t blocks = w.cols / kNvfp4Block;
  for (int64_t g = first; g < last; ++g) {
    float32x4_t acc[N][2][4];  // [row of x][block parity][4 weight rows a vector]
    for (int r = 0; r < N; ++r)
      for (int p = 0; p < 2; ++p)
        for (float32x4_t& a : acc[r][p]) a = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = interleaved_block_at(w, g, b);
      const BlockWeights weights = look_up(block, table);
      float32x4_t m[4];
      row_scales(block, m);
      for (int r = 0; r < N; ++r) {
        const int8x16_t q = vld1q_s8(x[r]->q.data() + b * kNvfp4Block);
        const float32x4_t s = vdupq_n_f32(x[r]->scale[static_cast<size_t>(b)]);
        for (int v = 0; v < 4; ++v) {
          int32x4_t d = Dot::template dot_lane<0>(vdupq_n_s32(0), weights.low[0][v], q);
          d = Dot::template dot_lane<1>(d, weights.high[0][v], q);
          d = Dot::template dot_lane<2>(d, weights.low[1][v], q);
          d = Dot::template dot_lane<3>(d, weights.high[1][v], q);
          acc[r][b % 2][v] = vfmaq_f32(acc[r][b % 2][v], vcvtq_f32_s32(d), vmulq_f32(m[v], s));
        }
      }
    }
    const int64_t count = std::min(kInterleaveRows, w.rows - g * kInterleaveRows);
    for (int r = 0; r < N; ++r) store_rows(acc[r], w.tensor_scale, count, y[r] + g * kInterleaveRows);
  }
}

template <int N>
NVFP4LM_ARM_NEON void interleaved_neon(const Nvfp4Interleaved& w, int64_t first, int64_t last,
                                       const Int8BlockActivations* const* x, float* const* y) {
  interleaved_body<NeonDot, N>(w, first, last, x, y);
}

template <int N>
NVFP4LM_ARM_DOTPROD void interleaved_dotprod(const Nvfp4Interleaved& w, int64_t first, int64_t last,
                                             const Int8BlockActivations* const* x, float* const* y) {
  interleaved_body<SdotDot, N>(w, first, last, x, y);
}

// ---- NEON + I8MM: activation rows in pairs (an odd last row paired with itself), SMMLA per row pair ------------
// Accumulator [pair][parity][j] holds rows (2j, 2j+1) x activation rows (a, a') as lanes (2j, a), (2j, a'),
// (2j+1, a), (2j+1, a'); UZP1 / UZP2 of two of them give 4 consecutive weight rows of a, or of a'.
template <int N>
NVFP4LM_ARM_I8MM void interleaved_i8mm(const Nvfp4Interleaved& w, int64_t first, int64_t last,
                                       const Int8BlockActivations* const* x, float* const* y) {
  constexpr int kPairs = (N + 1) / 2;
  const int8x16_t table = doubled_e2m1_table();
  const int64_t blocks = w.cols / kNvfp4Block;
  for (int64_t g = first; g < last; ++g) {
    float32x4_t acc[kPairs][2][8];
    for (int p = 0; p < kPairs; ++p)
      for (int parity = 0; parity < 2; ++parity)
        for (float32x4_t& a : acc[p][parity]) a = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = interleaved_block_at(w, g, b);
      const BlockWeights weights = look_up(block, table);
      // Row pairs j = 2v, 2v + 1 of half h: rows (4v, 4v+1) and (4v+2, 4v+3), 8 weights each.
      int8x16_t row_pairs[2][8];
      for (int half = 0; half < 2; ++half)
        for (int v = 0; v < 4; ++v) {
          const int32x4_t low = vreinterpretq_s32_s8(weights.low[half][v]);
          const int32x4_t high = vreinterpretq_s32_s8(weights.high[half][v]);
          row_pairs[half][2 * v] = vreinterpretq_s8_s32(vzip1q_s32(low, high));
          row_pairs[half][2 * v + 1] = vreinterpretq_s8_s32(vzip2q_s32(low, high));
        }
      float32x4_t m[4];
      row_scales(block, m);
      for (int p = 0; p < kPairs; ++p) {
        const Int8BlockActivations& a = *x[2 * p];
        const Int8BlockActivations& a2 = *x[std::min(2 * p + 1, N - 1)];
        const int8_t* qa = a.q.data() + b * kNvfp4Block;
        const int8_t* qb = a2.q.data() + b * kNvfp4Block;
        const int8x16_t q_half[2] = {vcombine_s8(vld1_s8(qa), vld1_s8(qb)),
                                     vcombine_s8(vld1_s8(qa + 8), vld1_s8(qb + 8))};
        const float sa = a.scale[static_cast<size_t>(b)], sb = a2.scale[static_cast<size_t>(b)];
        for (int j = 0; j < 8; ++j) {
          int32x4_t d = vmmlaq_s32(vdupq_n_s32(0), row_pairs[0][j], q_half[0]);
          d = vmmlaq_s32(d, row_pairs[1][j], q_half[1]);
          // The scales of the lanes: m of rows 2j, 2j+1 times s of a, a' (the products the portable kernel forms).
          const float32x4_t m_rows = m[j / 2];
          const float m0 = j % 2 ? vgetq_lane_f32(m_rows, 2) : vgetq_lane_f32(m_rows, 0);
          const float m1 = j % 2 ? vgetq_lane_f32(m_rows, 3) : vgetq_lane_f32(m_rows, 1);
          const float lane_scales[4] = {m0 * sa, m0 * sb, m1 * sa, m1 * sb};
          acc[p][b % 2][j] = vfmaq_f32(acc[p][b % 2][j], vcvtq_f32_s32(d), vld1q_f32(lane_scales));
        }
      }
    }
    const int64_t count = std::min(kInterleaveRows, w.rows - g * kInterleaveRows);
    for (int p = 0; p < kPairs; ++p) {
      float32x4_t rows_a[2][4], rows_b[2][4];  // [parity][4 weight rows a vector]
      for (int parity = 0; parity < 2; ++parity)
        for (int v = 0; v < 4; ++v) {
          rows_a[parity][v] = vuzp1q_f32(acc[p][parity][2 * v], acc[p][parity][2 * v + 1]);
          rows_b[parity][v] = vuzp2q_f32(acc[p][parity][2 * v], acc[p][parity][2 * v + 1]);
        }
      store_rows(rows_a, w.tensor_scale, count, y[2 * p] + g * kInterleaveRows);
      if (2 * p + 1 < N) store_rows(rows_b, w.tensor_scale, count, y[2 * p + 1] + g * kInterleaveRows);
    }
  }
}

}  // namespace

RowKernels<InterleavedDotFn> nvfp4_interleaved_neon() {
  return row_kernels<InterleavedDotFn>([]<int N>() { return &interleaved_neon<N>; });
}
RowKernels<InterleavedDotFn> nvfp4_interleaved_dotprod() {
  return row_kernels<InterleavedDotFn>([]<int N>() { return &interleaved_dotprod<N>; });
}
RowKernels<InterleavedDotFn> nvfp4_interleaved_i8mm() {
  return row_kernels<InterleavedDotFn>([]<int N>() { return &interleaved_i8mm<N>; });
}

}  // namespace nvfp4lm::cpu::arm
#endif  // NVFP4LM_ARM_INTRINSICS
