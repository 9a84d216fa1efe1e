// Flash-attention forward for prefill and training (FlashAttention-2 schedule on mma.sync):
//  - a CTA of 4 warps owns 64 rows of one (batch row, kv head): row R = t * group + g is query t of q head
//    kv_head * group + g, so the group's heads share every K / V tile; each warp owns 16 rows and keeps their
//    Q fragments in registers, their output accumulator (16 x D fp32) and running max / sum;
//  - K / V tiles of 64 keys stream through shared memory in two cp.async stages (the first holds Q at the
//    start), one __syncthreads per tile;
//  - S = Q Kᵀ and O += P V with BF16 m16n8k16 mma, fp32 accumulation; softmax in base 2 and fp32;
//  - causal with a query offset: key tiles past the tile's last query are never loaded; the mask is applied
//    only to tiles that cross a row's diagonal; with segment ids, key tiles whose ids cannot match the query
//    tile's (segment summaries, attention_mma.h) are skipped, and the ids mask the rest element by element;
//  - tiles with the longest causal rows are launched first (reversed blockIdx.y, the slowest grid axis) so short
//    ones fill the tail.
// The launcher hands few-row problems (decode) to attention_decode.cu instead.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/attention_mma.h"

namespace nvfp4lm::cuda {
namespace attn {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

template <int D>
struct ForwardTiles {
  static constexpr int kTileElements = kTileRows * D;
  // K and V, two stages each, then two stages of key segment ids.
  static constexpr int kSmemBytes = 4 * kTileElements * 2 + 2 * kTileRows * 4;
};

struct ForwardParams : KernelShape {
  AttentionHeads q, k, v, out;
  float* lse;
  const int32_t* segment_ids;
  const int2* summary;  // segment summaries, [B, segment_chunks]
  int segment_chunks;
};

template <int D>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(ForwardParams p) {
  using Tiles = ForwardTiles<D>;
  NVFP4LM_DYNAMIC_SHARED(unsigned char, smem);
  bf16* k_tiles = reinterpret_cast<bf16*>(smem);
  bf16* v_tiles = k_tiles + 2 * Tiles::kTileElements;
  int* key_segments = reinterpret_cast<int*>(v_tiles + 2 * Tiles::kTileElements);
  NVFP4LM_SHARED(int, first_tile);

  const int tile = static_cast<int>(gridDim.y - 1 - blockIdx.y);  // the slowest grid axis: long rows launch first
  const int batch = static_cast<int>(blockIdx.x) / p.kv_heads, kv_head = static_cast<int>(blockIdx.x) % p.kv_heads;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const int row0 = tile * kTileRows;
  const int t_first = row0 / p.group;
  const int t_last = min(p.q_len - 1, (row0 + kTileRows - 1) / p.group);
  const int last_tile = (p.q_start + t_last) / kTileRows;
  const int2* summary = p.summary + static_cast<int64_t>(batch) * p.segment_chunks;
  const int32_t* segments = p.segment_ids + static_cast<int64_t>(batch) * p.q_len;

  // Key tiles that can share a segment with this query tile (segments imply q_start == 0, Tq == Tk).
  int2 query_segments = make_int2(0, 0);
  auto key_tile_needed = [&](int j) {
    if (p.segment_ids == nullptr) return true;
    const int first = j * kTileRows, last = min(first + kTileRows, p.kv_limit) - 1;
    return ranges_overlap(segment_range(summary, first, last), query_segments);
  };
  int j = 0;
  if (p.segment_ids != nullptr) {
    query_segments = segment_range(summary, t_first, t_last);
    if (threadIdx.x == 0) first_tile = last_tile;  // the diagonal tile always holds the last query's own key
    __syncthreads();
    for (int candidate = static_cast<int>(threadIdx.x); candidate < last_tile; candidate += kThreads)
      if (key_tile_needed(candidate)) atomicMin(&first_tile, candidate);
    __syncthreads();
    j = first_tile;
  }

  auto load_keys = [&](int key_tile, int stage) {
    const int key0 = key_tile * kTileRows;
    load_tile<D, kThreads>(k_tiles + stage * Tiles::kTileElements, p.k.base, [&](int r) -> const bf16* {
      return key0 + r < p.kv_limit ? head_row(p.k, batch, key0 + r, kv_head, D) : nullptr;
    });
    load_tile<D, kThreads>(v_tiles + stage * Tiles::kTileElements, p.v.base, [&](int r) -> const bf16* {
      return key0 + r < p.kv_limit ? head_row(p.v, batch, key0 + r, kv_head, D) : nullptr;
    });
    if (p.segment_ids != nullptr && threadIdx.x < kTileRows) {
      const int key = key0 + static_cast<int>(threadIdx.x);
      cp_async_4(smem_address(key_segments + stage * kTileRows + threadIdx.x), segments + min(key, p.q_len - 1),
                 key < p.kv_limit);
    }
  };

  // Prologue: Q into stage 1's K buffer, the first key tile into stage 0; Q fragments to registers.
  {
    bf16* q_tile = k_tiles + Tiles::kTileElements;
    load_tile<D, kThreads>(q_tile, p.q.base, [&](int r) -> const bf16* {
      const int row = row0 + r;
      if (row >= p.rows) return nullptr;
      return head_row(p.q, batch, row / p.group, kv_head * p.group + row % p.group, D);
    });
    load_keys(j, 0);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();
  }
  uint32_t q_frag[D / 16][4];
#pragma unroll
  for (int kd = 0; kd < D / 16; ++kd)
    ldmatrix_x4(q_frag[kd], a_address<D>(k_tiles + Tiles::kTileElements, warp * 16, kd, lane));
  __syncthreads();  // stage 1 is free for keys from here on

  // This thread's two rows (g and g + 8 of the warp's 16): last visible key and segment id.
  int row_limit[2], row_segment[2] = {0, 0};
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int t = (row0 + warp * 16 + g + 8 * rr) / p.group;  // may pass q_len - 1 on padding rows (not stored)
    row_limit[rr] = p.q_start + t;
    if (p.segment_ids != nullptr) row_segment[rr] = segments[min(t, p.q_len - 1)];
  }

  float o[D / 8][4];
#pragma unroll
  for (int nb = 0; nb < D / 8; ++nb) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

  for (int stage = 0;; stage ^= 1) {
    int next = j + 1;
    while (next <= last_tile && !key_tile_needed(next)) ++next;
    const bool has_next = next <= last_tile;
    if (has_next) load_keys(next, stage ^ 1);
    cp_async_commit();

    // S = Q Kᵀ for the warp's 16 rows x 64 keys.
    const bf16* k_tile = k_tiles + stage * Tiles::kTileElements;
    float s[8][4];
#pragma unroll
    for (int nb = 0; nb < 8; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
#pragma unroll
    for (int kd = 0; kd < D / 16; ++kd) {
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t kb[4];
        ldmatrix_x4(kb, b_address<D>(k_tile, np * 16, kd, lane));
        mma_bf16(s[2 * np], q_frag[kd], kb[0], kb[1]);
        mma_bf16(s[2 * np + 1], q_frag[kd], kb[2], kb[3]);
      }
    }

    // Scale into base 2, mask what a row must not see.
    const int key0 = j * kTileRows;
    const bool masked = p.segment_ids != nullptr || key0 + kTileRows - 1 > p.q_start + t_first;
#pragma unroll
    for (int nb = 0; nb < 8; ++nb) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        s[nb][i] *= p.scale_log2;
        if (masked) {
          const int key_index = nb * 8 + 2 * c + (i & 1), rr = i >> 1;
          bool visible = key0 + key_index <= row_limit[rr];
          if (p.segment_ids != nullptr)
            visible = visible && key_segments[stage * kTileRows + key_index] == row_segment[rr];
          if (!visible) s[nb][i] = -INFINITY;
        }
      }
    }

    // Online softmax: new running max per row, rescale, exponentiate.
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) online_softmax_step(s, o, rr, row_max[rr], row_sum[rr]);

    // O += P V.
    const bf16* v_tile = v_tiles + stage * Tiles::kTileElements;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t pa[4];
      accumulator_to_a(s, kk, pa);
      mma_tile_rows<D>(o, pa, v_tile, kk * 16, lane);
    }

    cp_async_wait_all();
    __syncthreads();  // the next tile has landed and nobody reads this stage any more
    if (!has_next) break;
    j = next;
  }

  // Normalise and store BF16 rows; lse in natural log.
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const float sum = quad_sum(row_sum[rr]);
    const int row = row0 + warp * 16 + g + 8 * rr;
    if (row >= p.rows) continue;
    const int t = row / p.group, head = kv_head * p.group + row % p.group;
    const float inverse = 1.f / sum;
    bf16* out = const_cast<bf16*>(head_row(p.out, batch, t, head, D));
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb)
      *reinterpret_cast<uint32_t*>(out + nb * 8 + 2 * c) =
          pack_bf16x2(o[nb][2 * rr] * inverse, o[nb][2 * rr + 1] * inverse);
    if (p.lse != nullptr && c == 0)
      p.lse[(static_cast<int64_t>(batch) * p.q_heads + head) * p.q_len + t] = (row_max[rr] + log2f(sum)) * kLn2;
  }
}

// One warp per 16 positions: min / max segment id.
__global__ void segment_summary_kernel(const int32_t* ids, int64_t length, int64_t chunks, int64_t total, int2* out) {
  const int64_t entry = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (entry >= total) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t batch = entry / chunks, chunk = entry % chunks;
  const int64_t position = chunk * kSegmentSpan + lane;
  const bool valid = lane < kSegmentSpan && position < length;
  int low = valid ? ids[batch * length + position] : INT_MAX;
  int high = valid ? low : INT_MIN;
  for (int offset = 16; offset > 0; offset >>= 1) {
    low = min(low, __shfl_xor_sync(0xFFFFFFFFu, low, offset));
    high = max(high, __shfl_xor_sync(0xFFFFFFFFu, high, offset));
  }
  if (lane == 0) out[entry] = make_int2(low, high);
}

template <int D>
void launch_forward(const ForwardParams& params, int64_t batch, int64_t kv_heads) {
  constexpr int kSmem = ForwardTiles<D>::kSmemBytes;
  static bool configured = false;  // per instantiation; the attribute is per function, set once
  if (!configured) {
    NVFP4LM_CUDA_CHECK(
        cudaFuncSetAttribute(attention_forward_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    configured = true;
  }
  const dim3 grid(static_cast<unsigned int>(batch * kv_heads),
                  static_cast<unsigned int>((params.rows + kTileRows - 1) / kTileRows));
  NVFP4LM_LAUNCH(attention_forward_kernel<D>, grid, kThreads, kSmem)(params);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_segment_summary(const AttentionShape& shape, int2* summary) {
  if (shape.segment_ids == nullptr) return;
  const int64_t chunks = segment_chunks(shape.q_len), total = shape.batch * chunks;
  constexpr int kWarpsPerBlock = 8;
  const auto blocks = static_cast<unsigned int>((total + kWarpsPerBlock - 1) / kWarpsPerBlock);
  NVFP4LM_LAUNCH(segment_summary_kernel, blocks, 32 * kWarpsPerBlock, 0)
  (shape.segment_ids, shape.q_len, chunks, total, summary);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace attn

bool attention_head_dim_supported(int64_t head_dim) { return head_dim == 16 || head_dim == 64 || head_dim == 128; }

int64_t attention_segment_summary_bytes(const AttentionShape& shape) {
  if (shape.segment_ids == nullptr) return 0;
  return shape.batch * attn::segment_chunks(shape.q_len) * static_cast<int64_t>(sizeof(int2));
}

void attention_forward(const AttentionShape& shape, AttentionHeads q, AttentionHeads k, AttentionHeads v,
                       AttentionHeads out, float* lse, void* scratch) {
  if (shape.batch == 0 || shape.q_len == 0 || shape.q_heads == 0) return;
  if (attention_decode_scratch_bytes(shape) > 0) {
    attn::launch_decode(shape, q, k, v, out, lse, scratch);
    return;
  }
  attn::ForwardParams params{};
  attn::set_kernel_shape(params, shape);
  params.q = q;
  params.k = k;
  params.v = v;
  params.out = out;
  params.lse = lse;
  params.segment_ids = shape.segment_ids;
  params.summary = static_cast<const int2*>(scratch);
  params.segment_chunks = static_cast<int>(attn::segment_chunks(shape.q_len));
  attn::launch_segment_summary(shape, static_cast<int2*>(scratch));
  switch (shape.head_dim) {
    case 16:
      attn::launch_forward<16>(params, shape.batch, shape.kv_heads);
      break;
    case 64:
      attn::launch_forward<64>(params, shape.batch, shape.kv_heads);
      break;
    default:
      attn::launch_forward<128>(params, shape.batch, shape.kv_heads);
      break;
  }
}

}  // namespace nvfp4lm::cuda
