// See qk_norm_rope_store.h. One group of D / 8 lanes per (token, head) of q, k and v; no grid-stride loop: a decode
// step has tokens x (q_heads + 2 kv_heads) heads (48 for one Qwen3-4B token), a few blocks.
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/reduce.cuh"
#include "ops/cuda/input_errors.h"
#include "ops/cuda/kernel_common.cuh"
#include "ops/cuda/qk_norm_rope_store.h"
#include "ops/cuda/rope_math.cuh"

namespace nvfp4lm::cuda {
namespace {

using namespace kernels;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    qk_norm_rope_store_kernel(QkNormRopeStore p, int lanes, int64_t items, unsigned long long* error_slot) {
  const int groups = kThreads / lanes;
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * groups + static_cast<int>(threadIdx.x) / lanes;
  if (item >= items) return;  // whole groups leave together, so the group shuffles below stay complete
  const unsigned mask = group_mask(lanes);
  const int64_t width = p.head_dim, half = width / 2, col = int64_t{lane} * kChunk;
  const int64_t heads = p.q_heads + 2 * p.kv_heads;
  const int64_t token = item / heads;
  int64_t head = item - token * heads;
  const int32_t slot = p.slots[token];
  const bool cached = slot >= 0 && slot < p.cache_slots;  // store_kv_rows skips a slot outside the cache

  if (head >= p.q_heads + p.kv_heads) {  // a value head: into the cache as it is
    head -= p.q_heads + p.kv_heads;
    if (cached) {
      const auto* from = reinterpret_cast<const uint4*>(p.v + (token * p.kv_heads + head) * width + col);
      *reinterpret_cast<uint4*>(p.cache_values + (slot * p.kv_heads + head) * width + col) = *from;
    }
    return;
  }
  const bool is_q = head < p.q_heads;
  if (!is_q) head -= p.q_heads;
  bf16* x = reinterpret_cast<bf16*>(is_q ? p.q + (token * p.q_heads + head) * width
                                         : p.k + (token * p.kv_heads + head) * width);

  // RMS norm over the head, as rmsnorm_forward_kernel computes it for a row of `lanes` chunks.
  float v[kChunk];
  load_chunk(x, col, width, true, v);
  float sum_squares = 0.f;
#pragma unroll
  for (int k = 0; k < kChunk; ++k) sum_squares += v[k] * v[k];
  sum_squares = group_sum(sum_squares, lanes, mask);
  const float inv = 1.f / sqrtf(sum_squares / static_cast<float>(width) + p.eps);
  float w[kChunk];
  load_chunk(is_q ? p.q_norm : p.k_norm, col, width, true, w);
#pragma unroll
  for (int k = 0; k < kChunk; ++k) v[k] = to_float(from_float<bf16>((v[k] * inv) * w[k]));  // as the norm stores it

  // RoPE: lanes [0, lanes / 2) hold x1 = x[:D/2], the others x2, pairs lane L and L + lanes / 2.
  const int half_lanes = lanes / 2;
  float partner[kChunk];
#pragma unroll
  for (int k = 0; k < kChunk; ++k) partner[k] = __shfl_xor_sync(mask, v[k], half_lanes, lanes);
  const int32_t position = p.positions[token];
  if (position >= 0 && position < p.table_rows) {
    const int64_t pair = int64_t{lane % half_lanes} * kChunk;
    float c[kChunk], s[kChunk];
    load_chunk(p.cos + position * half, pair, half, true, c);
    load_chunk(p.sin + position * half, pair, half, true, s);
    const bool first_half = lane < half_lanes;
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      float x1, x2;
      rope_rotate_pair(first_half ? v[k] : partner[k], first_half ? partner[k] : v[k], c[k], s[k], x1, x2);
      v[k] = first_half ? x1 : x2;
    }
  } else if (lane == 0 && head == 0) {
    record_input_error(error_slot, token, position);  // rope_forward leaves the token unrotated and reports it
  }
  store_chunk(x, col, width, true, v);
  if (!is_q && cached)
    store_chunk(reinterpret_cast<bf16*>(p.cache_keys + (slot * p.kv_heads + head) * width), col, width, true, v);
}

}  // namespace

bool qk_norm_rope_store_supported(int64_t head_dim) {
  return head_dim >= 16 && head_dim <= 256 && (head_dim & (head_dim - 1)) == 0;
}

void qk_norm_rope_store(const QkNormRopeStore& op) {
  const int64_t items = op.tokens * (op.q_heads + 2 * op.kv_heads);
  if (items == 0) return;
  const int lanes = static_cast<int>(op.head_dim / kChunk);
  const int64_t groups = kThreads / lanes;
  const auto blocks = static_cast<unsigned>((items + groups - 1) / groups);
  NVFP4LM_LAUNCH(qk_norm_rope_store_kernel, blocks, kThreads, 0)
  (op, lanes, items, input_error_slot(InputErrorKind::RopePosition));
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
