// Device building blocks of the attention kernels (included by attention_*.cu only):
//  - tiles of [rows, D] BF16 in shared memory, 16-byte chunks XOR-swizzled by row so that the 8 row addresses of
//    an ldmatrix (8 consecutive rows, same logical chunk) hit 8 different bank groups;
//  - cp.async loads (zero-filled for rows that do not exist: padding rows must be finite, 0 * NaN would leak);
//  - ldmatrix / ldmatrix.trans fragment loads and the BF16 mma.sync m16n8k16 with fp32 accumulators.
// Fragment layout (PTX ISA, mma.m16n8k16), lane = 4 g + c: A a0 (row g, k 2c..2c+1), a1 (row g+8, k 2c..),
// a2 (row g, k 2c+8..), a3 (row g+8, k 2c+8..); B b0 (k 2c..2c+1, col g), b1 (k 2c+8.., col g);
// C c0, c1 (row g, cols 2c, 2c+1), c2, c3 (row g+8, cols 2c, 2c+1). A C tile of two 8-column blocks converts
// to an A fragment in registers (the FlashAttention-2 trick used for P·V and its transposes).
// Softmax works in base 2: scores are multiplied by scale * log2(e) and exponentiated with fast_exp2 (ptx.h); the
// forward and decode kernels share its online (running max and sum) step, online_softmax_step.
// The instructions themselves (cp.async, ldmatrix, mma.sync, ex2) are in ptx.h.
#pragma once

#include <cuda_bf16.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "ops/cuda/attention.h"
#include "ops/cuda/ptx.h"

namespace nvfp4lm::cuda::attn {

using bf16 = __nv_bfloat16;

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr int kSegmentSpan = 16;  // positions per segment-summary entry
inline constexpr int kTileRows = 64;     // rows (query rows or keys) of every tile

// Two floats -> BF16x2 (round to nearest even), `low` in the low half (the lower column / k index).
__device__ __forceinline__ uint32_t pack_bf16x2(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

__device__ __forceinline__ float2 unpack_bf16x2(uint32_t pair) {
  return make_float2(__uint_as_float(pair << 16), __uint_as_float(pair & 0xFFFF0000u));
}

// The A fragment of the 16-column chunk `kk` of a 16 x (8 n) accumulator tile (two 8-column blocks 2kk, 2kk+1).
template <int kBlocks>
__device__ __forceinline__ void accumulator_to_a(const float (&acc)[kBlocks][4], int kk, uint32_t (&a)[4]) {
  a[0] = pack_bf16x2(acc[2 * kk][0], acc[2 * kk][1]);
  a[1] = pack_bf16x2(acc[2 * kk][2], acc[2 * kk][3]);
  a[2] = pack_bf16x2(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
  a[3] = pack_bf16x2(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
}

// AttentionShape as every attention kernel reads it: ints, rows R = t * group + g (query t of q head
// kv_head * group + g), keys visible below kv_limit, scores scaled into base 2. The kernels' parameter structs
// derive from it; the launchers fill it with set_kernel_shape().
struct KernelShape {
  int q_len, q_heads, kv_heads, group, rows, q_start, kv_limit;
  float scale_log2;
};

inline void set_kernel_shape(KernelShape& out, const AttentionShape& shape) {
  out.q_len = static_cast<int>(shape.q_len);
  out.q_heads = static_cast<int>(shape.q_heads);
  out.kv_heads = static_cast<int>(shape.kv_heads);
  out.group = static_cast<int>(shape.q_heads / shape.kv_heads);
  out.rows = static_cast<int>(shape.q_len * out.group);
  out.q_start = static_cast<int>(shape.q_start);
  out.kv_limit = static_cast<int>(shape.q_start + shape.q_len);
  out.scale_log2 = shape.scale * kLog2e;
}

// ---- swizzled [rows, D] tiles --------------------------------------------------------------------------------

// Element offset of 16-byte chunk `chunk` of row `row` (the chunk index is XORed with the row's low bits).
template <int D>
__device__ __forceinline__ int tile_offset(int row, int chunk) {
  constexpr int kChunks = D / 8;
  constexpr int kMask = (kChunks < 8 ? kChunks : 8) - 1;
  return row * D + ((chunk ^ (row & kMask)) << 3);
}

// ldmatrix row addresses, `lane` = threadIdx.x % 32, tiles row-major [rows, D]:
//  - a_address: the A fragment of rows row0..row0+15, k chunk kd (16 columns);
//  - b_address: B fragments of two 8-row blocks (rows row0..row0+15 as the n index, 16 columns as k): regs
//    {0, 1} = block row0, {2, 3} = block row0 + 8 — for "x · tileᵀ";
//  - bt_address (with ldmatrix .trans): B fragments with the tile's rows as k (rows row0..row0+15) and
//    two 8-column blocks of chunk pair dp as n: regs {0, 1} = columns 16 dp.., {2, 3} = 16 dp + 8.. — for
//    "x · tile". The same address with .trans also gives the A fragment of the transposed tile.
template <int D>
__device__ __forceinline__ uint32_t a_address(const bf16* tile, int row0, int kd, int lane) {
  return smem_address(tile + tile_offset<D>(row0 + (lane & 15), kd * 2 + (lane >> 4)));
}
template <int D>
__device__ __forceinline__ uint32_t b_address(const bf16* tile, int row0, int kd, int lane) {
  return smem_address(tile + tile_offset<D>(row0 + (lane >> 4) * 8 + (lane & 7), kd * 2 + ((lane >> 3) & 1)));
}
template <int D>
__device__ __forceinline__ uint32_t bt_address(const bf16* tile, int row0, int dp, int lane) {
  return smem_address(tile + tile_offset<D>(row0 + ((lane >> 3) & 1) * 8 + (lane & 7), dp * 2 + (lane >> 4)));
}

// acc (16 rows x D, fp32) += a (an A fragment: 16 rows x 16 k) · rows row0..row0+15 of a [rows, D] tile as k: the
// P·V step of the forward and decode, and dV += Pᵀ dout, dK += dSᵀ Q of the backward.
template <int D>
__device__ __forceinline__ void mma_tile_rows(float (&acc)[D / 8][4], const uint32_t (&a)[4], const bf16* tile,
                                              int row0, int lane) {
#pragma unroll
  for (int dp = 0; dp < D / 16; ++dp) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, bt_address<D>(tile, row0, dp, lane));
    mma_bf16(acc[2 * dp], a, b[0], b[1]);
    mma_bf16(acc[2 * dp + 1], a, b[2], b[3]);
  }
}

// Loads kRows rows of D BF16 into a swizzled tile; row_pointer(r) gives the global row or nullptr (zeros).
template <int D, int kThreads, int kRows = kTileRows, typename RowPointer>
__device__ __forceinline__ void load_tile(bf16* tile, const void* any_valid_address, RowPointer row_pointer) {
  constexpr int kChunks = D / 8, kTotal = kRows * kChunks;
#pragma unroll
  for (int i = 0; i < (kTotal + kThreads - 1) / kThreads; ++i) {
    const int index = static_cast<int>(threadIdx.x) + i * kThreads;
    if (kTotal % kThreads != 0 && index >= kTotal) break;
    const int row = index / kChunks, chunk = index % kChunks;
    const bf16* source = row_pointer(row);
    cp_async_16(smem_address(tile + tile_offset<D>(row, chunk)), source ? source + chunk * 8 : any_valid_address,
                source != nullptr);
  }
}

// Address of head `head` of token `token` in batch row `batch`.
__device__ __forceinline__ const bf16* head_row(const AttentionHeads& heads, int batch, int64_t token, int head,
                                                int head_dim) {
  return static_cast<const bf16*>(heads.base) + batch * heads.batch_stride + token * heads.token_stride +
         static_cast<int64_t>(head) * head_dim;
}

// ---- online softmax ------------------------------------------------------------------------------------------

// Over the quad of lanes (c = 0..3 of one g) that holds a row of an m16n8 accumulator; every lane receives it.
__device__ __forceinline__ float quad_max(float value) {
  value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, 1));
  return fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, 2));
}
__device__ __forceinline__ float quad_sum(float value) {
  value += __shfl_xor_sync(0xFFFFFFFFu, value, 1);
  return value + __shfl_xor_sync(0xFFFFFFFFu, value, 2);
}

// One online-softmax step of row `rr` of this thread's two (g, g + 8) after a tile of base-2 scores `s` (masked
// scores -inf): the row's running max takes the tile's (over the quad), `s` becomes exp2(s - max), the tile's sum
// joins `row_sum`, and `row_sum` and the output accumulator `o` are rescaled by exp2(old max - new max). A row
// with nothing visible yet keeps max -inf and exponentiates against 0, so its probabilities are 0, not NaN.
template <int kScoreBlocks, int kOutBlocks>
__device__ __forceinline__ void online_softmax_step(float (&s)[kScoreBlocks][4], float (&o)[kOutBlocks][4], int rr,
                                                    float& row_max, float& row_sum) {
  float tile_max = -INFINITY;
#pragma unroll
  for (int nb = 0; nb < kScoreBlocks; ++nb) tile_max = fmaxf(tile_max, fmaxf(s[nb][2 * rr], s[nb][2 * rr + 1]));
  const float new_max = fmaxf(row_max, quad_max(tile_max));
  const float base = new_max == -INFINITY ? 0.f : new_max;
  const float correction = fast_exp2(row_max - base);
  row_max = new_max;
  float sum = 0.f;
#pragma unroll
  for (int nb = 0; nb < kScoreBlocks; ++nb) {
    s[nb][2 * rr] = fast_exp2(s[nb][2 * rr] - base);
    s[nb][2 * rr + 1] = fast_exp2(s[nb][2 * rr + 1] - base);
    sum += s[nb][2 * rr] + s[nb][2 * rr + 1];
  }
  row_sum = row_sum * correction + sum;
#pragma unroll
  for (int nb = 0; nb < kOutBlocks; ++nb) {
    o[nb][2 * rr] *= correction;
    o[nb][2 * rr + 1] *= correction;
  }
}

// ---- masks -------------------------------------------------------------------------------------------------

// Union of the segment-id ranges of positions [first, last] (inclusive) of one batch row's summary.
__device__ __forceinline__ int2 segment_range(const int2* summary_row, int first, int last) {
  int2 range = make_int2(INT_MAX, INT_MIN);
  for (int chunk = first / kSegmentSpan; chunk <= last / kSegmentSpan; ++chunk) {
    const int2 s = summary_row[chunk];
    range.x = min(range.x, s.x);
    range.y = max(range.y, s.y);
  }
  return range;
}

// Could any position with ids in `a` share a segment with one in `b`? (Exact skip test for sorted ids, as
// packing writes them; for unsorted ids it is conservative: it may keep a tile that turns out fully masked.)
__device__ __forceinline__ bool ranges_overlap(int2 a, int2 b) { return a.x <= b.y && b.x <= a.y; }

// Fills the summaries (int2 [B, ceil(T / 16)]) for shape.segment_ids; no-op without segments.
void launch_segment_summary(const AttentionShape& shape, int2* summary);

// The split-key decode path (attention_decode.cu), used when attention_decode_scratch_bytes(shape) > 0.
void launch_decode(const AttentionShape& shape, AttentionHeads q, AttentionHeads k, AttentionHeads v,
                   AttentionHeads out, float* lse, void* scratch);

inline int64_t segment_chunks(int64_t length) { return (length + kSegmentSpan - 1) / kSegmentSpan; }

}  // namespace nvfp4lm::cuda::attn
