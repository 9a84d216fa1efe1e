// See ops/kv_store.h.
#include "ops/cpu/kv_store.h"

#include <cstring>

#include "core/error.h"

namespace nvfp4lm::cpu {

void store_kv_rows(const Tensor& fresh, Tensor& cache, const Tensor& slots) {
  const int64_t batch = fresh.dim(0), tokens = fresh.dim(1), capacity = cache.dim(1);
  const size_t row_bytes = static_cast<size_t>(fresh.dim(2) * fresh.dim(3)) * dtype_bytes(fresh.dtype());
  const int32_t* slot = static_cast<const int32_t*>(slots.raw());
  const size_t element = dtype_bytes(fresh.dtype());
  const auto* src = static_cast<const char*>(fresh.raw());
  auto* dst = static_cast<char*>(cache.raw());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t s = slot[b * tokens + t];
      NVFP4LM_ASSERT(s >= 0 && s < capacity, "store_kv_rows: slot {} of token ({}, {}) is outside the cache [0, {})", s,
                     b, t, capacity);
      std::memcpy(dst + static_cast<size_t>(b * cache.stride(0) + s * cache.stride(1)) * element,
                  src + static_cast<size_t>(b * fresh.stride(0) + t * fresh.stride(1)) * element, row_bytes);
    }
  }
}

}  // namespace nvfp4lm::cpu
