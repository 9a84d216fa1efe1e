// The decode step's per-head work between the q/k/v projections and attention, as one op:
//   q = rope(rmsnorm_head(q, q_norm)),  k = rope(rmsnorm_head(k, k_norm))     in place, per head over head_dim
//   cache_keys[slots] = k,  cache_values[slots] = v                          (store_kv_rows)
// with the results of exactly that op sequence (rmsnorm_forward, rope_forward, store_kv_rows; norms in fp32, the
// normalised heads rounded to the activations' dtype before the rotation, as the sequence stores them). On CUDA
// one launch (ops/cuda/qk_norm_rope_store.h) for BF16 heads of 16 to 256 elements (a power of two) in contiguous
// buffers; the op sequence otherwise, and on the CPU (the reference).
// Shapes, as the decode step holds them: q [B, T, Hq, D], k and v [B, T, Hkv, D], positions I32 [B, T] (on the
// device: a captured graph reads each replay's), caches [1, B * S, Hkv, D] (every cache row's token slots as one
// row), slots I32 [1, B * T] (each token's slot in that row). A position outside the table is reported as
// rope_forward reports it (at the next call on CUDA); a slot outside the cache is skipped (store_kv_rows).
#pragma once

#include "core/tensor.h"
#include "ops/rope.h"

namespace nvfp4lm {

void qk_norm_rope_store(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm, float eps,
                        const Tensor& positions, const RopeTable& rope, Tensor& cache_keys, Tensor& cache_values,
                        const Tensor& slots);

// Whether qk_norm_rope_store runs as one CUDA launch for these operands (else as the op sequence).
bool qk_norm_rope_store_fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cache_keys,
                              const Tensor& cache_values);

}  // namespace nvfp4lm
