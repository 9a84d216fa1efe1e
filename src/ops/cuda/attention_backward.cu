// Flash-attention backward (FlashAttention-2 schedule on mma.sync), recomputing P from the forward's lse:
//  1. delta_kernel: delta = rowsum(dout * out) per (b, h, t), fp32 (the softmax-gradient correction);
//     the fp32 dq accumulator is zeroed.
//  2. backward_kernel: a CTA of 4 warps owns 64 keys of one (batch row, kv head) and keeps K, V in shared
//     memory and dK, dV in registers (warp w: keys 16w..16w+15, all D columns). It walks the query tiles that
//     can see its keys — 64 rows R = t * group + g, so the group's q heads all add into the same dK / dV —
//     double-buffering Q, dout, lse, delta through cp.async, and per tile computes (transposed, keys as rows):
//       Sᵀ = K Qᵀ, Pᵀ = exp2(Sᵀ scale log2e - lse log2e) (masked), dPᵀ = V doutᵀ, dSᵀ = Pᵀ (dPᵀ - delta),
//       dV += Pᵀ dout, dK += dSᵀ Q, and dQ += dS K for the tile's rows through shared memory and fp32 atomics.
//     Causal and segment skipping as in the forward (query tiles that cannot see the keys are not visited).
//     Pᵀ enters dSᵀ as the BF16 values the dV mma used: with fp32 Pᵀ next to dPᵀ, dK and dV (128 fp32 registers
//     per thread at D = 128) the kernel spills; for the same reason the dQ loop is not unrolled and the Sᵀ / dPᵀ
//     loops only by 2 (ptxas -v: 255 registers, no spills).
//  3. dq_convert_kernel: dq = BF16(scale * accumulator) into the (strided) dq view.
// Determinism: dK and dV are reproducible (one CTA owns each key, fixed order); dq sums the key tiles' atomic
// contributions in arbitrary order, so it can differ in the last bits from run to run.
// Keys in [q_start + Tq, Tk) are never seen: their dK / dV are written as zeros.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/reduce.cuh"
#include "ops/cuda/attention.h"
#include "ops/cuda/attention_mma.h"

namespace nvfp4lm::cuda {
namespace attn {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRowData = 4 * kTileRows;  // per stage: lse, delta (float), row limit, segment (int)

// kStages: 2 double-buffers the query-side tiles (the next Q / dout tile loads while this one is used); 1 loads
// them after, for GPUs whose blocks get less shared memory (SM 12.x: 99 KiB, where D = 128 needs 106 KiB with two
// stages: launch_backward picks by the device's opt-in limit).
template <int D, int kStages>
struct BackwardTiles {
  static constexpr int kTileElements = kTileRows * D;
  // K, V, Q x kStages, dout x kStages, dSᵀ [64 keys][64 rows], then kStages stages of row data.
  static constexpr int kSmemBytes =
      (2 + 2 * kStages) * kTileElements * 2 + kTileRows * kTileRows * 2 + kStages * kRowData * 4;
};

struct BackwardParams : KernelShape {
  AttentionHeads dout, q, k, v, dk, dv;
  const float* lse;
  const float* delta;
  float* dq_accum;  // [B, Tq, Hq, D]
  const int32_t* segment_ids;
  const int2* summary;
  int k_len, segment_chunks;
  float scale;
};

template <int D, int kStages>
__global__ void __launch_bounds__(kThreads) backward_kernel(BackwardParams p) {
  using Tiles = BackwardTiles<D, kStages>;
  NVFP4LM_DYNAMIC_SHARED(unsigned char, smem);
  bf16* k_tile = reinterpret_cast<bf16*>(smem);
  bf16* v_tile = k_tile + Tiles::kTileElements;
  bf16* q_tiles = v_tile + Tiles::kTileElements;                // [kStages]
  bf16* dout_tiles = q_tiles + kStages * Tiles::kTileElements;  // [kStages]
  bf16* ds_tile = dout_tiles + kStages * Tiles::kTileElements;  // [64 keys][64 rows], swizzled like a D = 64 tile
  // [kStages][lse, delta, limit, seg][64]
  float* row_data = reinterpret_cast<float*>(ds_tile + kTileRows * kTileRows);
  NVFP4LM_SHARED(int, first_tile);

  const int batch = static_cast<int>(blockIdx.x) / p.kv_heads, kv_head = static_cast<int>(blockIdx.x) % p.kv_heads;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const int key0 = static_cast<int>(blockIdx.y) * kTileRows;  // slowest axis: early keys (most queries) first
  const int2* summary = p.summary + static_cast<int64_t>(batch) * p.segment_chunks;
  const int32_t* segments = p.segment_ids + static_cast<int64_t>(batch) * p.q_len;

  // Query tiles whose rows can see these keys: t >= key0 - q_start, and sharing a segment.
  const int tile_end = (p.rows + kTileRows - 1) / kTileRows;
  int tile_begin = key0 < p.kv_limit ? max(0, key0 - p.q_start) * p.group / kTileRows : tile_end;
  int2 key_segments = make_int2(0, 0);
  auto query_tile_needed = [&](int i) {
    if (p.segment_ids == nullptr) return true;
    const int first = i * kTileRows / p.group, last = min(p.q_len - 1, (i * kTileRows + kTileRows - 1) / p.group);
    return ranges_overlap(segment_range(summary, first, last), key_segments);
  };
  if (p.segment_ids != nullptr && tile_begin < tile_end) {
    key_segments = segment_range(summary, key0, min(key0 + kTileRows, p.kv_limit) - 1);
    if (threadIdx.x == 0) first_tile = tile_end;
    __syncthreads();
    for (int candidate = tile_begin + static_cast<int>(threadIdx.x); candidate < tile_end; candidate += kThreads)
      if (query_tile_needed(candidate)) atomicMin(&first_tile, candidate);
    __syncthreads();
    tile_begin = first_tile;
  }

  auto load_queries = [&](int i, int stage) {
    const int row_base = i * kTileRows;
    auto query_row = [&](const AttentionHeads& heads, int r) -> const bf16* {
      const int row = row_base + r;
      if (row >= p.rows) return nullptr;
      return head_row(heads, batch, row / p.group, kv_head * p.group + row % p.group, D);
    };
    load_tile<D, kThreads>(q_tiles + stage * Tiles::kTileElements, p.q.base, [&](int r) { return query_row(p.q, r); });
    load_tile<D, kThreads>(dout_tiles + stage * Tiles::kTileElements, p.dout.base,
                           [&](int r) { return query_row(p.dout, r); });
    if (threadIdx.x < kTileRows) {
      const int r = static_cast<int>(threadIdx.x), row = row_base + r;
      float* data = row_data + stage * kRowData;
      int* limits = reinterpret_cast<int*>(data + 2 * kTileRows);
      const bool valid = row < p.rows;
      const int t = valid ? row / p.group : 0, head = kv_head * p.group + (valid ? row % p.group : 0);
      const int64_t stat = (static_cast<int64_t>(batch) * p.q_heads + head) * p.q_len + t;
      cp_async_4(smem_address(data + r), p.lse + stat, valid);
      cp_async_4(smem_address(data + kTileRows + r), p.delta + stat, valid);
      limits[r] = valid ? p.q_start + t : -1;  // padding rows see nothing
      limits[kTileRows + r] = p.segment_ids != nullptr ? segments[t] : 0;
    }
  };

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int nb = 0; nb < D / 8; ++nb) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[nb][e] = dv[nb][e] = 0.f;
  }

  if (tile_begin < tile_end) {
    load_tile<D, kThreads>(k_tile, p.k.base, [&](int r) -> const bf16* {
      return key0 + r < p.kv_limit ? head_row(p.k, batch, key0 + r, kv_head, D) : nullptr;
    });
    load_tile<D, kThreads>(v_tile, p.v.base, [&](int r) -> const bf16* {
      return key0 + r < p.kv_limit ? head_row(p.v, batch, key0 + r, kv_head, D) : nullptr;
    });
    load_queries(tile_begin, 0);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    int key_segment[2] = {0, 0};
    if (p.segment_ids != nullptr) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) key_segment[rr] = segments[min(key0 + warp * 16 + g + 8 * rr, p.q_len - 1)];
    }

    int i = tile_begin;
    for (int stage = 0;; stage = (stage + 1) % kStages) {
      int next = i + 1;
      while (next < tile_end && !query_tile_needed(next)) ++next;
      const bool has_next = next < tile_end;
      if (kStages == 2 && has_next) load_queries(next, stage ^ 1);
      cp_async_commit();

      const bf16* q_stage = q_tiles + stage * Tiles::kTileElements;
      const bf16* dout_stage = dout_tiles + stage * Tiles::kTileElements;
      const float* lse = row_data + stage * kRowData;
      const float* delta = lse + kTileRows;
      const int* limits = reinterpret_cast<const int*>(lse + 2 * kTileRows);
      const int* row_segments = limits + kTileRows;

      // Sᵀ = K Qᵀ: the warp's 16 keys x 64 query rows.
      float pt[8][4];
#pragma unroll
      for (int nb = 0; nb < 8; ++nb) pt[nb][0] = pt[nb][1] = pt[nb][2] = pt[nb][3] = 0.f;
#pragma unroll 2  // fully unrolled, the hoisted fragment loads spill (D = 128)
      for (int kd = 0; kd < D / 16; ++kd) {
        uint32_t ka[4];
        ldmatrix_x4(ka, a_address<D>(k_tile, warp * 16, kd, lane));
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t qb[4];
          ldmatrix_x4(qb, b_address<D>(q_stage, np * 16, kd, lane));
          mma_bf16(pt[2 * np], ka, qb[0], qb[1]);
          mma_bf16(pt[2 * np + 1], ka, qb[2], qb[3]);
        }
      }
      // Pᵀ, masked: padding rows (limit -1), keys after the row's query, other segments.
      const int row_base = i * kTileRows;
      const bool masked = p.segment_ids != nullptr || row_base + kTileRows > p.rows ||
                          p.q_start + row_base / p.group < key0 + kTileRows - 1;
#pragma unroll
      for (int nb = 0; nb < 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = nb * 8 + 2 * c + (e & 1), rr = e >> 1;
          bool visible = true;
          if (masked) {
            visible = key0 + warp * 16 + g + 8 * rr <= limits[col];
            if (p.segment_ids != nullptr) visible = visible && row_segments[col] == key_segment[rr];
          }
          pt[nb][e] = visible ? fast_exp2(pt[nb][e] * p.scale_log2 - lse[col] * kLog2e) : 0.f;
        }
      }
      // dV += Pᵀ dout; P is kept as the BF16 fragments the mma used (fp32 Pᵀ would not fit beside dPᵀ).
      uint32_t p_frag[4][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        accumulator_to_a(pt, kk, p_frag[kk]);
        mma_tile_rows<D>(dv, p_frag[kk], dout_stage, kk * 16, lane);
      }
      // dPᵀ = V doutᵀ.
      float dst[8][4];
#pragma unroll
      for (int nb = 0; nb < 8; ++nb) dst[nb][0] = dst[nb][1] = dst[nb][2] = dst[nb][3] = 0.f;
#pragma unroll 2
      for (int kd = 0; kd < D / 16; ++kd) {
        uint32_t va[4];
        ldmatrix_x4(va, a_address<D>(v_tile, warp * 16, kd, lane));
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t ob[4];
          ldmatrix_x4(ob, b_address<D>(dout_stage, np * 16, kd, lane));
          mma_bf16(dst[2 * np], va, ob[0], ob[1]);
          mma_bf16(dst[2 * np + 1], va, ob[2], ob[3]);
        }
      }
      // dSᵀ = Pᵀ (dPᵀ - delta), in place of dPᵀ.
#pragma unroll
      for (int nb = 0; nb < 8; ++nb) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const float2 prob = unpack_bf16x2(p_frag[nb / 2][(nb % 2) * 2 + half]);
          const int col = nb * 8 + 2 * c;
          dst[nb][2 * half] = prob.x * (dst[nb][2 * half] - delta[col]);
          dst[nb][2 * half + 1] = prob.y * (dst[nb][2 * half + 1] - delta[col + 1]);
        }
      }
      // dK += dSᵀ Q (scaled at the end).
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        uint32_t da[4];
        accumulator_to_a(dst, kk, da);
        mma_tile_rows<D>(dk, da, q_stage, kk * 16, lane);
      }
      // dSᵀ to shared memory, then dQ (the warp's 16 query rows) += dS K.
#pragma unroll
      for (int nb = 0; nb < 8; ++nb) {
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int key = warp * 16 + g + 8 * rr;
          *reinterpret_cast<uint32_t*>(ds_tile + tile_offset<kTileRows>(key, nb) + 2 * c) =
              pack_bf16x2(dst[nb][2 * rr], dst[nb][2 * rr + 1]);
        }
      }
      __syncthreads();
      uint32_t ds_frag[4][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) ldmatrix_x4_trans(ds_frag[kk], b_address<kTileRows>(ds_tile, kk * 16, warp, lane));
      float* dq_row[2];
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int row = row_base + warp * 16 + g + 8 * rr;
        dq_row[rr] = nullptr;
        if (row < p.rows) {
          const int t = row / p.group, head = kv_head * p.group + row % p.group;
          dq_row[rr] = p.dq_accum + ((static_cast<int64_t>(batch) * p.q_len + t) * p.q_heads + head) * D;
        }
      }
#pragma unroll 1
      for (int dp = 0; dp < D / 16; ++dp) {
        float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          uint32_t kb[4];
          ldmatrix_x4_trans(kb, bt_address<D>(k_tile, kk * 16, dp, lane));
          mma_bf16(acc[0], ds_frag[kk], kb[0], kb[1]);
          mma_bf16(acc[1], ds_frag[kk], kb[2], kb[3]);
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
#pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            if (dq_row[rr] == nullptr) continue;
            float* target = dq_row[rr] + dp * 16 + half * 8 + 2 * c;
#if __CUDA_ARCH__ >= 900 || NVFP4LM_CUDA_EMULATION  // the emulator has the sm_90 vector atomic
            atomicAdd(reinterpret_cast<float2*>(target), make_float2(acc[half][2 * rr], acc[half][2 * rr + 1]));
#else
            atomicAdd(target, acc[half][2 * rr]);
            atomicAdd(target + 1, acc[half][2 * rr + 1]);
#endif
          }
        }
      }
      cp_async_wait_all();
      __syncthreads();  // next stage landed; this stage and dSᵀ are free
      if (!has_next) break;
      if (kStages == 1) {  // one stage: the next tile loads only now that this one is free
        load_queries(next, 0);
        cp_async_commit();
        cp_async_wait_all();
        __syncthreads();
      }
      i = next;
    }
  }

  // dK (times the softmax scale) and dV; keys nobody sees get zeros.
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int key = key0 + warp * 16 + g + 8 * rr;
    if (key >= p.k_len) continue;
    bf16* dk_out = const_cast<bf16*>(head_row(p.dk, batch, key, kv_head, D));
    bf16* dv_out = const_cast<bf16*>(head_row(p.dv, batch, key, kv_head, D));
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb) {
      *reinterpret_cast<uint32_t*>(dk_out + nb * 8 + 2 * c) =
          pack_bf16x2(dk[nb][2 * rr] * p.scale, dk[nb][2 * rr + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(dv_out + nb * 8 + 2 * c) = pack_bf16x2(dv[nb][2 * rr], dv[nb][2 * rr + 1]);
    }
  }
}

// One warp per (b, t, h) row: delta = sum_d dout * out (fp32).
__global__ void delta_kernel(AttentionHeads dout, AttentionHeads out, int64_t rows, int q_len, int q_heads,
                             int head_dim, float* delta) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int head = static_cast<int>(row % q_heads);
  const int64_t token = row / q_heads;
  const int t = static_cast<int>(token % q_len), batch = static_cast<int>(token / q_len);
  const bf16* a = head_row(dout, batch, t, head, head_dim);
  const bf16* b = head_row(out, batch, t, head, head_dim);
  float sum = 0.f;
  for (int d = 2 * lane; d < head_dim; d += 64) {
    const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(a + d));
    const float2 y = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(b + d));
    sum += x.x * y.x + x.y * y.y;
  }
  sum = warp_sum(sum);
  if (lane == 0) delta[(static_cast<int64_t>(batch) * q_heads + head) * q_len + t] = sum;
}

// dq = BF16(scale * accumulator), 8 values (16 bytes) per thread.
__global__ void dq_convert_kernel(const float* accum, AttentionHeads dq, int64_t vectors, int q_len, int q_heads,
                                  int head_dim, float scale) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= vectors) return;
  const int per_row = head_dim / 8;
  const int64_t row = index / per_row;  // (b, t, h) in [B, Tq, Hq] order, as the accumulator
  const int d = static_cast<int>(index % per_row) * 8;
  const int head = static_cast<int>(row % q_heads);
  const int64_t token = row / q_heads;
  const float4 a = *reinterpret_cast<const float4*>(accum + index * 8);
  const float4 b = *reinterpret_cast<const float4*>(accum + index * 8 + 4);
  const uint4 packed = make_uint4(pack_bf16x2(a.x * scale, a.y * scale), pack_bf16x2(a.z * scale, a.w * scale),
                                  pack_bf16x2(b.x * scale, b.y * scale), pack_bf16x2(b.z * scale, b.w * scale));
  bf16* target =
      const_cast<bf16*>(head_row(dq, static_cast<int>(token / q_len), static_cast<int>(token % q_len), head, head_dim));
  *reinterpret_cast<uint4*>(target + d) = packed;
}

template <int D, int kStages>
void launch_backward_stages(const BackwardParams& params, const dim3& grid) {
  constexpr int kSmem = BackwardTiles<D, kStages>::kSmemBytes;
  // Set for every launch: cheap, and right whichever device is current (the limit is per device and function).
  NVFP4LM_CUDA_CHECK(
      cudaFuncSetAttribute(backward_kernel<D, kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  NVFP4LM_LAUNCH((backward_kernel<D, kStages>), grid, kThreads, kSmem)(params);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

template <int D>
void launch_backward(const BackwardParams& params, int64_t batch, int64_t kv_heads) {
  int device = 0, optin = 0;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&device));
  NVFP4LM_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const dim3 grid(static_cast<unsigned int>(batch * kv_heads),
                  static_cast<unsigned int>((params.k_len + kTileRows - 1) / kTileRows));
  if (BackwardTiles<D, 2>::kSmemBytes <= optin) {
    launch_backward_stages<D, 2>(params, grid);
  } else {
    launch_backward_stages<D, 1>(params, grid);
  }
}

constexpr int64_t kAlign = 256;
int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

struct BackwardScratch {
  int64_t delta_bytes, dq_bytes, summary_bytes;
  explicit BackwardScratch(const AttentionShape& s)
      : delta_bytes(aligned(s.batch * s.q_heads * s.q_len * 4)),
        dq_bytes(aligned(s.batch * s.q_len * s.q_heads * s.head_dim * 4)),
        summary_bytes(aligned(attention_segment_summary_bytes(s))) {}
  int64_t total() const { return delta_bytes + dq_bytes + summary_bytes; }
};

}  // namespace
}  // namespace attn

int64_t attention_backward_scratch_bytes(const AttentionShape& shape) { return attn::BackwardScratch(shape).total(); }

void attention_backward(const AttentionShape& shape, AttentionHeads dout, AttentionHeads q, AttentionHeads k,
                        AttentionHeads v, AttentionHeads out, const float* lse, AttentionHeads dq, AttentionHeads dk,
                        AttentionHeads dv, void* scratch) {
  if (shape.batch == 0 || shape.k_len == 0 || shape.q_heads == 0) return;
  const attn::BackwardScratch layout(shape);
  char* bytes = static_cast<char*>(scratch);
  float* delta = reinterpret_cast<float*>(bytes);
  float* dq_accum = reinterpret_cast<float*>(bytes + layout.delta_bytes);
  int2* summary = reinterpret_cast<int2*>(bytes + layout.delta_bytes + layout.dq_bytes);
  const int64_t rows = shape.batch * shape.q_len * shape.q_heads;
  const int q_len = static_cast<int>(shape.q_len), q_heads = static_cast<int>(shape.q_heads);
  const int head_dim = static_cast<int>(shape.head_dim);

  if (rows > 0) {
    NVFP4LM_CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, static_cast<size_t>(rows * shape.head_dim * 4), stream()));
    constexpr int kRowsPerBlock = 8;
    NVFP4LM_LAUNCH(attn::delta_kernel, static_cast<unsigned int>((rows + kRowsPerBlock - 1) / kRowsPerBlock),
                   32 * kRowsPerBlock, 0)
    (dout, out, rows, q_len, q_heads, head_dim, delta);
    NVFP4LM_CUDA_CHECK_LAUNCH();
  }
  attn::launch_segment_summary(shape, summary);

  attn::BackwardParams params{};
  attn::set_kernel_shape(params, shape);
  params.dout = dout;
  params.q = q;
  params.k = k;
  params.v = v;
  params.dk = dk;
  params.dv = dv;
  params.lse = lse;
  params.delta = delta;
  params.dq_accum = dq_accum;
  params.segment_ids = shape.segment_ids;
  params.summary = summary;
  params.k_len = static_cast<int>(shape.k_len);
  params.segment_chunks = static_cast<int>(attn::segment_chunks(shape.q_len));
  params.scale = shape.scale;
  switch (shape.head_dim) {
    case 16:
      attn::launch_backward<16>(params, shape.batch, shape.kv_heads);
      break;
    case 64:
      attn::launch_backward<64>(params, shape.batch, shape.kv_heads);
      break;
    default:
      attn::launch_backward<128>(params, shape.batch, shape.kv_heads);
      break;
  }

  if (rows > 0) {
    const int64_t vectors = rows * shape.head_dim / 8;
    constexpr int kBlock = 256;
    NVFP4LM_LAUNCH(attn::dq_convert_kernel, static_cast<unsigned int>((vectors + kBlock - 1) / kBlock), kBlock, 0)
    (dq_accum, dq, vectors, q_len, q_heads, head_dim, shape.scale);
    NVFP4LM_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace nvfp4lm::cuda
