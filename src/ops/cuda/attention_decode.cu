// Decode attention over a KV cache (flash-decoding): few query rows per kv head (Tq * group <= 64, e.g. one
// new token and its group of q heads), thousands of keys.
//  - decode_kernel: a CTA owns 16 rows (row R = t * group + g, as in the forward) of one (batch row, kv head)
//    and one split of the key range; K / V tiles of 64 keys stream through two cp.async stages; warp w takes
//    keys 16w..16w+15 of each tile (all 4 warps share the rows' Q fragments), with its own online softmax; the
//    warps merge through shared memory and the CTA writes an unnormalised partial (O, max, sum) per row;
//  - the last CTA of a (batch row, kv head, row group) to finish merges the splits' partials (base-2 log-sum-exp
//    weights) into BF16 out and lse: every CTA publishes its partials (__threadfence) and takes a ticket from a
//    counter (atomicAdd); the one that draws splits - 1 combines, in the order the separate combine kernel did (per
//    row: 32 lanes fold splits lane, lane + 32, ... then a shuffle tree; per column: the splits in order), and sets
//    the counter back to 0 for the next launch. One launch a decode instead of two (the counters: one persistent,
//    zeroed buffer per device, split_counters()).
// Splits: enough CTAs for ~2 per SM for one batch row (kv_heads * row groups * splits), each at least one key
// tile; the same for any batch size, so a row's result does not depend on the other rows.
// With per-row cache rows (AttentionShape::kv_rows) batch row b reads its keys / values from k / v row kv_rows[b].
// Keys past the row group's last query are never read, so a cache longer than q_start + Tq is fine.
// With per-row starts read on the device (AttentionShape::q_start_rows, for CUDA-graph decode) the grid (number of
// splits, scratch) is planned for the largest start and each CTA divides its row's actual key tiles among the
// splits itself; splits left without a tile write empty partials (max -inf, sum 0), which the combine weighs 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/attention_mma.h"

namespace nvfp4lm::cuda {
namespace attn {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kGroupRows = 16;      // rows per CTA: one m16 tile
constexpr int kMaxDecodeRows = 64;  // Tq * group up to this use the decode path

struct DecodePlan {
  int64_t row_groups = 0, tiles = 0, tiles_per_split = 0, splits = 0;
  int64_t partial_entries() const { return row_groups * kGroupRows * splits; }  // per (batch, kv head)
};

int multiprocessors() {
  static int cached[64] = {};
  int device = 0;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&device));
  int& count = cached[device & 63];
  if (count == 0) NVFP4LM_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

DecodePlan plan(const AttentionShape& shape) {
  DecodePlan plan;
  const int64_t rows = shape.q_len * (shape.q_heads / shape.kv_heads);
  plan.row_groups = (rows + kGroupRows - 1) / kGroupRows;
  plan.tiles = (shape.q_start + shape.q_len + kTileRows - 1) / kTileRows;
  // Per batch row: how a row's keys are split must not depend on how many rows share the launch, so a sequence in
  // a batched decode step gets the attention (and summation order) it gets alone.
  const int64_t units = shape.kv_heads * plan.row_groups;
  const int64_t wanted = (2 * multiprocessors() + units - 1) / units;
  plan.splits = std::clamp<int64_t>(wanted, 1, plan.tiles);
  plan.tiles_per_split = (plan.tiles + plan.splits - 1) / plan.splits;
  plan.splits = (plan.tiles + plan.tiles_per_split - 1) / plan.tiles_per_split;
  return plan;
}

struct DecodeParams : KernelShape {  // q_start, kv_limit: the planned maxima (see q_start_rows)
  AttentionHeads q, k, v, out;
  float* lse;
  unsigned* done;               // [B * Hkv][row groups]: CTAs of the group that have written their partials
  float* partial_out;           // [B * Hkv][padded rows][splits][D], unnormalised
  float2* partial_stats;        // [B * Hkv][padded rows][splits]: (running max in base 2, sum)
  const int32_t* q_start_rows;  // [B] on the device, or null: q_start for every row
  const int32_t* kv_rows;       // [B] on the device, or null: row b reads k / v row b
  int kv_batch;                 // rows of k / v (kv_rows are clamped into it)
  int padded_rows, tiles, tiles_per_split, splits;
};

template <int D>
struct DecodeTiles {
  static constexpr int kTileElements = kTileRows * D;
  static constexpr int kKeyBytes = 4 * kTileElements * 2;                // K and V, two stages
  static constexpr int kMergeBytes = kWarps * kGroupRows * (D + 2) * 4;  // per-warp O, max, sum (reuses K / V)
  static constexpr int kSmemBytes = (kKeyBytes > kMergeBytes ? kKeyBytes : kMergeBytes) + kGroupRows * D * 2;
};

template <int D>
__device__ void combine_rows(const DecodeParams& p, int head_pair, int row0);

template <int D>
__global__ void __launch_bounds__(kThreads) decode_kernel(DecodeParams p) {
  using Tiles = DecodeTiles<D>;
  NVFP4LM_DYNAMIC_SHARED(unsigned char, smem);
  bf16* k_tiles = reinterpret_cast<bf16*>(smem);
  bf16* v_tiles = k_tiles + 2 * Tiles::kTileElements;
  bf16* q_tile = reinterpret_cast<bf16*>(smem + (Tiles::kSmemBytes - kGroupRows * D * 2));

  const int split = static_cast<int>(blockIdx.x), group_index = static_cast<int>(blockIdx.y);
  const int head_pair = static_cast<int>(blockIdx.z);  // batch * kv_heads + kv_head
  const int batch = head_pair / p.kv_heads, kv_head = head_pair % p.kv_heads;
  const int kv_batch_row = p.kv_rows == nullptr ? batch : min(max(p.kv_rows[batch], 0), p.kv_batch - 1);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const int row0 = group_index * kGroupRows;
  const int t_first = row0 / p.group;
  const int t_last = min(p.q_len - 1, (row0 + kGroupRows - 1) / p.group);
  // q_start (and the keys that exist) of this batch row; p.q_start / p.kv_limit are the planned maxima.
  const int q_start = p.q_start_rows == nullptr ? p.q_start : min(max(p.q_start_rows[batch], 0), p.q_start);
  const int kv_limit = min(q_start + p.q_len, p.kv_limit);
  // Per-row starts: the grid is planned for the largest start, and this row's key tiles are spread over all of
  // its splits here, so a short row still uses every CTA.
  int tiles = p.tiles, tiles_per_split = p.tiles_per_split;
  if (p.q_start_rows != nullptr) {
    tiles = (q_start + p.q_len + kTileRows - 1) / kTileRows;
    tiles_per_split = (tiles + p.splits - 1) / p.splits;
  }
  const int tile_begin = split * tiles_per_split;
  const int tile_end = min(min(tile_begin + tiles_per_split, tiles), (q_start + t_last) / kTileRows + 1);

  auto load_keys = [&](int key_tile, int stage) {
    const int key0 = key_tile * kTileRows;
    load_tile<D, kThreads>(k_tiles + stage * Tiles::kTileElements, p.k.base, [&](int r) -> const bf16* {
      return key0 + r < kv_limit ? head_row(p.k, kv_batch_row, key0 + r, kv_head, D) : nullptr;
    });
    load_tile<D, kThreads>(v_tiles + stage * Tiles::kTileElements, p.v.base, [&](int r) -> const bf16* {
      return key0 + r < kv_limit ? head_row(p.v, kv_batch_row, key0 + r, kv_head, D) : nullptr;
    });
  };

  load_tile<D, kThreads, kGroupRows>(q_tile, p.q.base, [&](int r) -> const bf16* {
    const int row = row0 + r;
    if (row >= p.rows) return nullptr;
    return head_row(p.q, batch, row / p.group, kv_head * p.group + row % p.group, D);
  });
  if (tile_begin < tile_end) load_keys(tile_begin, 0);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  uint32_t q_frag[D / 16][4];
#pragma unroll
  for (int kd = 0; kd < D / 16; ++kd) ldmatrix_x4(q_frag[kd], a_address<D>(q_tile, 0, kd, lane));

  int row_limit[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) row_limit[rr] = q_start + (row0 + g + 8 * rr) / p.group;

  float o[D / 8][4];
#pragma unroll
  for (int nb = 0; nb < D / 8; ++nb) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

  int stage = 0;
  for (int j = tile_begin; j < tile_end; ++j, stage ^= 1) {
    if (j + 1 < tile_end) load_keys(j + 1, stage ^ 1);
    cp_async_commit();

    // S for 16 rows x this warp's 16 keys.
    const bf16* k_tile = k_tiles + stage * Tiles::kTileElements;
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kd = 0; kd < D / 16; ++kd) {
      uint32_t kb[4];
      ldmatrix_x4(kb, b_address<D>(k_tile, warp * 16, kd, lane));
      mma_bf16(s[0], q_frag[kd], kb[0], kb[1]);
      mma_bf16(s[1], q_frag[kd], kb[2], kb[3]);
    }
    const int key0 = j * kTileRows + warp * 16;
    const bool masked = key0 + 15 > q_start + t_first;
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        s[nb][i] *= p.scale_log2;
        if (masked && key0 + nb * 8 + 2 * c + (i & 1) > row_limit[i >> 1]) s[nb][i] = -INFINITY;
      }
    }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) online_softmax_step(s, o, rr, row_max[rr], row_sum[rr]);
    uint32_t pa[4];
    accumulator_to_a(s, 0, pa);
    mma_tile_rows<D>(o, pa, v_tiles + stage * Tiles::kTileElements, warp * 16, lane);
    cp_async_wait_all();
    __syncthreads();
  }

  // Merge the 4 warps (the K / V stages are free: the loop ended on a barrier after its last wait).
  float* merge_o = reinterpret_cast<float*>(smem);       // [warp][row][D]
  float* merge_max = merge_o + kWarps * kGroupRows * D;  // [warp][row]
  float* merge_sum = merge_max + kWarps * kGroupRows;    // [warp][row]
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const float sum = quad_sum(row_sum[rr]);
    const int row = g + 8 * rr;
    float* target = merge_o + (warp * kGroupRows + row) * D + 2 * c;
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb)
      *reinterpret_cast<float2*>(target + nb * 8) = make_float2(o[nb][2 * rr], o[nb][2 * rr + 1]);
    if (c == 0) {
      merge_max[warp * kGroupRows + row] = row_max[rr];
      merge_sum[warp * kGroupRows + row] = sum;
    }
  }
  __syncthreads();
  for (int index = static_cast<int>(threadIdx.x); index < kGroupRows * D; index += kThreads) {
    const int row = index / D, col = index % D;
    if (row0 + row >= p.rows) break;  // rows are in order: the rest are padding too
    float best = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) best = fmaxf(best, merge_max[w * kGroupRows + row]);
    float value = 0.f, sum = 0.f;
    if (best != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float weight = fast_exp2(merge_max[w * kGroupRows + row] - best);
        value += weight * merge_o[(w * kGroupRows + row) * D + col];
        sum += weight * merge_sum[w * kGroupRows + row];
      }
    }
    const int64_t entry = (static_cast<int64_t>(head_pair) * p.padded_rows + row0 + row) * p.splits + split;
    p.partial_out[entry * D + col] = value;
    if (col == 0) p.partial_stats[entry] = make_float2(best, sum);
  }

  // Publish this split's partials; the last CTA of the row group to arrive merges them all.
  NVFP4LM_SHARED(unsigned, ticket);
  __threadfence();
  __syncthreads();
  unsigned* done = p.done + static_cast<int64_t>(head_pair) * gridDim.y + group_index;
  if (threadIdx.x == 0) ticket = atomicAdd(done, 1u);
  __syncthreads();
  if (ticket != static_cast<unsigned>(p.splits) - 1) return;
  combine_rows<D>(p, head_pair, row0);
  if (threadIdx.x == 0) atomicExch(done, 0u);  // ready for the next launch (and the next replay of a graph)
}

// (max, sum) pairs in base 2: the merged pair. An empty partial is (-inf, 0).
__device__ __forceinline__ float2 merge_stats(float2 a, float2 b) {
  const float best = fmaxf(a.x, b.x);
  if (best == -INFINITY) return make_float2(-INFINITY, 0.f);
  return make_float2(best, a.y * fast_exp2(a.x - best) + b.y * fast_exp2(b.x - best));
}

// Rows [row0, row0 + kGroupRows) of one (batch row, kv head): the splits' partials merged into out and lse, by the
// CTA's warps (warp w takes rows w, w + kWarps, ...). A row's arithmetic is the separate combine kernel's: lane l
// folds splits l, l + 32, ..., the lanes meet in a shuffle tree, every column sums the splits in order. Partials of
// other CTAs are read past L1 (__ldcg): their stores were published by __threadfence, not by this CTA.
template <int D>
__device__ void combine_rows(const DecodeParams& p, int head_pair, int row0) {
  const int batch = head_pair / p.kv_heads, kv_head = head_pair % p.kv_heads;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int row = row0 + warp; row < row0 + kGroupRows && row < p.rows; row += kWarps) {
    const int64_t entry0 = (static_cast<int64_t>(head_pair) * p.padded_rows + row) * p.splits;
    float2 total = make_float2(-INFINITY, 0.f);
    for (int s = lane; s < p.splits; s += 32) total = merge_stats(total, __ldcg(p.partial_stats + entry0 + s));
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float2 other =
          make_float2(__shfl_xor_sync(0xFFFFFFFFu, total.x, offset), __shfl_xor_sync(0xFFFFFFFFu, total.y, offset));
      total = merge_stats(total, other);
    }
    const int t = row / p.group, head = kv_head * p.group + row % p.group;
    const float inverse = 1.f / total.y;
    bf16* out = const_cast<bf16*>(head_row(p.out, batch, t, head, D));
    for (int col = lane; col < D; col += 32) {
      float value = 0.f;
      for (int s = 0; s < p.splits; ++s)
        value += __ldcg(p.partial_out + (entry0 + s) * D + col) *
                 fast_exp2(__ldcg(p.partial_stats + entry0 + s).x - total.x);
      out[col] = __float2bfloat16_rn(value * inverse);
    }
    if (p.lse != nullptr && lane == 0)
      p.lse[(static_cast<int64_t>(batch) * p.q_heads + head) * p.q_len + t] = (total.x + log2f(total.y)) * kLn2;
  }
}

template <int D>
void launch(const DecodeParams& params, const DecodePlan& plan, int64_t head_pairs) {
  constexpr int kSmem = DecodeTiles<D>::kSmemBytes;
  static bool configured = false;
  if (!configured) {
    NVFP4LM_CUDA_CHECK(cudaFuncSetAttribute(decode_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    configured = true;
  }
  const dim3 grid(static_cast<unsigned int>(plan.splits), static_cast<unsigned int>(plan.row_groups),
                  static_cast<unsigned int>(head_pairs));
  NVFP4LM_LAUNCH(decode_kernel<D>, grid, kThreads, kSmem)(params);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

// `count` zeroed arrival counters on the current device: one buffer per device, grown (outside a graph capture)
// when a launch needs more, never freed. Each launch leaves its counters at 0 again. One buffer per device is
// enough because each device runs its kernels on one stream (core/cuda/runtime.h), so two launches never overlap.
unsigned* split_counters(int64_t count) {
  struct Buffer {
    unsigned* data = nullptr;
    int64_t count = 0;
  };
  static Buffer buffers[64];
  static std::mutex mutex;  // host threads that share a device
  std::lock_guard lock(mutex);
  int device = 0;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&device));
  Buffer& b = buffers[device & 63];
  if (b.count < count) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    NVFP4LM_CUDA_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(current_stream_handle()), &capturing));
    if (capturing != cudaStreamCaptureStatusNone)
      fail(cudaErrorStreamCaptureUnsupported,
           "attention decode: more split counters needed during a graph capture (the eager step before it should "
           "have made them)",
           __FILE__, __LINE__);
    const int64_t grown = std::max<int64_t>(count, 4096);  // the old buffer stays: a captured graph may use it
    b.data = static_cast<unsigned*>(device_malloc(device, static_cast<size_t>(grown) * sizeof(unsigned)));
    memset_zero(b.data, static_cast<size_t>(grown) * sizeof(unsigned));
    b.count = grown;
  }
  return b.data;
}

}  // namespace

void launch_decode(const AttentionShape& shape, AttentionHeads q, AttentionHeads k, AttentionHeads v,
                   AttentionHeads out, float* lse, void* scratch) {
  const DecodePlan decode = plan(shape);
  const int64_t head_pairs = shape.batch * shape.kv_heads;
  DecodeParams params{};
  set_kernel_shape(params, shape);
  params.q = q;
  params.k = k;
  params.v = v;
  params.out = out;
  params.lse = lse;
  params.done = split_counters(head_pairs * decode.row_groups);
  params.q_start_rows = shape.q_start_rows;
  params.kv_rows = shape.kv_rows;
  params.kv_batch = static_cast<int>(shape.kv_rows != nullptr ? shape.kv_batch : shape.batch);
  params.partial_out = static_cast<float*>(scratch);
  params.partial_stats =
      reinterpret_cast<float2*>(params.partial_out + head_pairs * decode.partial_entries() * shape.head_dim);
  params.padded_rows = static_cast<int>(decode.row_groups * kGroupRows);
  params.tiles = static_cast<int>(decode.tiles);
  params.tiles_per_split = static_cast<int>(decode.tiles_per_split);
  params.splits = static_cast<int>(decode.splits);
  switch (shape.head_dim) {
    case 16:
      launch<16>(params, decode, head_pairs);
      break;
    case 64:
      launch<64>(params, decode, head_pairs);
      break;
    default:
      launch<128>(params, decode, head_pairs);
      break;
  }
}

}  // namespace attn

int64_t attention_decode_scratch_bytes(const AttentionShape& shape) {
  const int64_t rows = shape.q_len * (shape.q_heads / shape.kv_heads);
  if (shape.segment_ids != nullptr || rows > attn::kMaxDecodeRows || rows == 0 || shape.batch == 0) return 0;
  if (shape.batch_invariant && shape.prompt_rows && shape.q_start_rows == nullptr) return 0;
  const attn::DecodePlan decode = attn::plan(shape);
  return shape.batch * shape.kv_heads * decode.partial_entries() * (shape.head_dim + 2) *
         static_cast<int64_t>(sizeof(float));
}

}  // namespace nvfp4lm::cuda
