// Shape checks and device dispatch for ops/kv_store.h.
#include "ops/kv_store.h"

#include "ops/cpu/kv_store.h"
#include "ops/dispatch.h"

#if NVFP4LM_HAS_CUDA
#include "ops/cuda/kv_store.h"
#include "ops/cuda/tensor_rows.h"
#endif

namespace nvfp4lm {
namespace {

// Each token's [H, D] is one contiguous run.
bool heads_contiguous(const Tensor& t) { return t.stride(3) == 1 && (t.dim(2) == 1 || t.stride(2) == t.dim(3)); }

}  // namespace

void store_kv_rows(const Tensor& fresh, Tensor& cache, const Tensor& slots) {
  NVFP4LM_ASSERT(fresh.rank() == 4 && cache.rank() == 4 && fresh.dim(0) == cache.dim(0) &&
                     fresh.dim(2) == cache.dim(2) && fresh.dim(3) == cache.dim(3) && fresh.dtype() == cache.dtype(),
                 "store_kv_rows: fresh {} and cache {} must be [B, T, H, D] and [B, S, H, D] of one dtype", fresh.str(),
                 cache.str());
  NVFP4LM_ASSERT(heads_contiguous(fresh) && heads_contiguous(cache),
                 "store_kv_rows: fresh {} and cache {} need each token's [H, D] contiguous", fresh.str(), cache.str());
  NVFP4LM_ASSERT(slots.dtype() == DType::I32 && slots.rank() == 2 && slots.dim(0) == fresh.dim(0) &&
                     slots.dim(1) == fresh.dim(1) && slots.is_contiguous(),
                 "store_kv_rows: slots {} must be contiguous I32 [{}, {}]", slots.str(), fresh.dim(0), fresh.dim(1));
  [[maybe_unused]] const Device device = common_device("store_kv_rows", {&fresh, &cache, &slots});
  if (fresh.numel() == 0) return;
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    // Tokens as rows of H * D elements: fresh [B * T], cache [B * S] (two-level strides allowed).
    cuda::store_kv_rows(cuda::device_rows(fresh, 2, "store_kv_rows fresh"), fresh.dim(1),
                        cuda::device_int32(slots, "store_kv_rows slots"),
                        cuda::device_rows(cache, 2, "store_kv_rows cache"), cache.dim(1));
    return;
  }
#endif
  cpu::store_kv_rows(fresh, cache, slots);
}

}  // namespace nvfp4lm
