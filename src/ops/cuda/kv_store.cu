// See kv_store.h. A grid-stride loop over 16-byte chunks (or single elements when rows are not 16-byte aligned)
// of every fresh token row; each chunk reads its token's slot.
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "ops/cuda/kernel_common.cuh"
#include "ops/cuda/kv_store.h"

namespace nvfp4lm::cuda {
namespace {

using namespace kernels;

constexpr int kThreads = 256;

// Copies `unit`-typed pieces: `units_per_row` of them make one token row.
template <typename Unit>
__global__ void store_kernel(DeviceRows fresh, int64_t tokens_per_row, const int32_t* slots, DeviceRows cache,
                             int64_t slots_per_row, int64_t units_per_row, int64_t element_bytes, int64_t items) {
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; item < items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = item / units_per_row, unit = item % units_per_row;
    const int64_t slot = slots[row];
    if (slot < 0 || slot >= slots_per_row) continue;
    const int64_t target = (row / tokens_per_row) * slots_per_row + slot;
    const auto* src =
        reinterpret_cast<const Unit*>(static_cast<const char*>(fresh.data) + fresh.offset(row) * element_bytes);
    auto* dst = reinterpret_cast<Unit*>(static_cast<char*>(cache.data) + cache.offset(target) * element_bytes);
    dst[unit] = src[unit];
  }
}

}  // namespace

void store_kv_rows(const DeviceRows& fresh, int64_t tokens_per_row, const int32_t* slots, const DeviceRows& cache,
                   int64_t slots_per_row) {
  const auto element_bytes = static_cast<int64_t>(dtype_size(fresh.dtype));
  const int64_t row_bytes = fresh.width * element_bytes;
  if (fresh.count == 0 || row_bytes == 0) return;
  // 16-byte units when every row start and the row length allow it.
  const bool wide = row_bytes % 16 == 0 && vectorizable(fresh) && vectorizable(cache);
  if (wide) {
    const int64_t units = row_bytes / 16, items = fresh.count * units;
    NVFP4LM_LAUNCH(store_kernel<uint4>, grid_stride_blocks(items, kThreads), kThreads, 0)
    (fresh, tokens_per_row, slots, cache, slots_per_row, units, element_bytes, items);
  } else {
    const int64_t units = row_bytes / 2, items = fresh.count * units;  // F32 rows are pairs of 16-bit units too
    NVFP4LM_LAUNCH(store_kernel<uint16_t>, grid_stride_blocks(items, kThreads), kThreads, 0)
    (fresh, tokens_per_row, slots, cache, slots_per_row, units, element_bytes, items);
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
