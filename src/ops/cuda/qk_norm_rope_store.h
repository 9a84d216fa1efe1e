// CUDA twin of ops/qk_norm_rope_store.h (raw pointers; ops/qk_norm_rope_store.cpp checks the operands): one launch
// for the decode step's QK-norm, RoPE and KV-cache store. A group of D / 8 lanes (one 8-element chunk each) takes
// one head of one token: for q and k heads the RMS norm over the head (the rmsnorm kernel's per-lane sums and group
// shuffle tree, so the same bits), the result rounded to BF16, the rotate-half pairs exchanged between lane L and
// L ^ (D / 16) with shuffles and rotated (ops/cuda/rope_math.cuh), then stored in place and, for k, in the cache;
// v heads are copied into the cache. Runs on cuda::stream().
#pragma once

#include <cstdint>

namespace nvfp4lm::cuda {

struct QkNormRopeStore {
  uint16_t* q = nullptr;        // [tokens, q_heads, head_dim] BF16, contiguous
  uint16_t* k = nullptr;        // [tokens, kv_heads, head_dim]
  const uint16_t* v = nullptr;  // [tokens, kv_heads, head_dim]
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;  // [head_dim] F32
  float eps = 0;
  const int32_t* positions = nullptr;  // [tokens]
  const float* cos = nullptr;
  const float* sin = nullptr;  // [table_rows, head_dim / 2] F32
  int64_t table_rows = 0;
  uint16_t* cache_keys = nullptr;
  uint16_t* cache_values = nullptr;  // [cache_slots, kv_heads, head_dim] BF16, contiguous
  int64_t cache_slots = 0;
  const int32_t* slots = nullptr;  // [tokens]: each token's slot in the caches
  int64_t tokens = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
};

// head_dim a power of two in [16, 256] (one chunk of 8 a lane, at most a warp a head).
bool qk_norm_rope_store_supported(int64_t head_dim);

void qk_norm_rope_store(const QkNormRopeStore& op);

}  // namespace nvfp4lm::cuda
