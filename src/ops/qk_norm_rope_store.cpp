// Shape checks and device dispatch for ops/qk_norm_rope_store.h: the fused CUDA launch where it applies, the op
// sequence it replaces everywhere else.
#include "ops/qk_norm_rope_store.h"

#include "ops/dispatch.h"
#include "ops/kv_store.h"
#include "ops/rmsnorm.h"

#if NVFP4LM_HAS_CUDA
#include "ops/cuda/input_errors.h"
#include "ops/cuda/qk_norm_rope_store.h"
#include "ops/cuda/tensor_rows.h"
#endif

namespace nvfp4lm {

bool qk_norm_rope_store_fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cache_keys,
                              const Tensor& cache_values) {
#if NVFP4LM_HAS_CUDA
  for (const Tensor* t : {&q, &k, &v, &cache_keys, &cache_values})
    if (!t->device().is_cuda() || t->dtype() != DType::BF16 || !t->is_contiguous() || t->rank() != 4) return false;
  return cuda::qk_norm_rope_store_supported(q.dim(3)) && k.dim(3) == q.dim(3) && v.shape() == k.shape() &&
         cache_keys.shape() == cache_values.shape() && cache_keys.dim(2) == k.dim(2) && cache_keys.dim(3) == k.dim(3);
#else
  (void)q, (void)k, (void)v, (void)cache_keys, (void)cache_values;
  return false;
#endif
}

void qk_norm_rope_store(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm, float eps,
                        const Tensor& positions, const RopeTable& rope, Tensor& cache_keys, Tensor& cache_values,
                        const Tensor& slots) {
  NVFP4LM_ASSERT(q.rank() == 4 && k.rank() == 4 && v.shape() == k.shape() && q.dim(0) == k.dim(0) &&
                     q.dim(1) == k.dim(1) && q.dim(3) == k.dim(3) && q.dim(3) == rope.head_dim(),
                 "qk_norm_rope_store: q {}, k {}, v {} must be [B, T, H, D] with D = {}", q.str(), k.str(), v.str(),
                 rope.head_dim());
  const int64_t tokens = q.dim(0) * q.dim(1);
  NVFP4LM_ASSERT(positions.dtype() == DType::I32 && positions.numel() == tokens && slots.dtype() == DType::I32 &&
                     slots.numel() == tokens && slots.is_contiguous() && positions.is_contiguous(),
                 "qk_norm_rope_store: positions {} and slots {} need one I32 a token ({})", positions.str(),
                 slots.str(), tokens);
#if NVFP4LM_HAS_CUDA
  if (qk_norm_rope_store_fused(q, k, v, cache_keys, cache_values)) {
    common_device("qk_norm_rope_store", {&q, &q_norm, &k_norm, &positions, &rope.cos(), &cache_keys, &slots});
    NVFP4LM_ASSERT(q_norm.dtype() == DType::F32 && k_norm.dtype() == DType::F32 && q_norm.numel() == q.dim(3) &&
                       k_norm.numel() == q.dim(3) && q_norm.is_contiguous() && k_norm.is_contiguous(),
                   "qk_norm_rope_store: norm weights {} / {} must be F32 [{}]", q_norm.str(), k_norm.str(), q.dim(3));
    cuda::throw_pending_input_errors();  // as rope_forward: a bad position of an earlier call is reported now
    cuda::set_input_error_limit(cuda::InputErrorKind::RopePosition, rope.max_positions());
    cuda::QkNormRopeStore op;
    op.q = static_cast<uint16_t*>(q.raw());
    op.k = static_cast<uint16_t*>(k.raw());
    op.v = static_cast<const uint16_t*>(v.raw());
    op.q_norm = static_cast<const float*>(q_norm.raw());
    op.k_norm = static_cast<const float*>(k_norm.raw());
    op.eps = eps;
    op.positions = cuda::device_int32(positions, "qk_norm_rope_store positions");
    op.cos = static_cast<const float*>(rope.cos().raw());
    op.sin = static_cast<const float*>(rope.sin().raw());
    op.table_rows = rope.max_positions();
    op.cache_keys = static_cast<uint16_t*>(cache_keys.raw());
    op.cache_values = static_cast<uint16_t*>(cache_values.raw());
    op.cache_slots = cache_keys.dim(0) * cache_keys.dim(1);
    op.slots = cuda::device_int32(slots, "qk_norm_rope_store slots");
    op.tokens = tokens;
    op.q_heads = q.dim(2);
    op.kv_heads = k.dim(2);
    op.head_dim = q.dim(3);
    cuda::qk_norm_rope_store(op);
    return;
  }
#endif
  rmsnorm_forward(q, q_norm, eps, q);
  rmsnorm_forward(k, k_norm, eps, k);
  rope_forward(q, positions, rope);
  rope_forward(k, positions, rope);
  const Tensor slot_rows = slots.reshape({1, tokens});
  store_kv_rows(k.reshape({1, tokens, k.dim(2), k.dim(3)}), cache_keys, slot_rows);
  store_kv_rows(v.reshape({1, tokens, v.dim(2), v.dim(3)}), cache_values, slot_rows);
}

}  // namespace nvfp4lm
