// CUDA twin of ops/kv_store.h, a raw-pointer launcher called by ops/kv_store.cpp. fresh: B * T token rows of
// H * D elements (F32, BF16 or F16); cache: B * S token rows of the same width and dtype; slots: B * T I32 on the
// device. Token row i = b * T + t goes to cache row b * S + slots[i]; a slot outside [0, S) is skipped (a kernel
// cannot throw; the dispatchers compute the slots). Copies bits exactly. Runs on cuda::stream().
#pragma once

#include <cstdint>

#include "ops/cuda/rows.h"

namespace nvfp4lm::cuda {

void store_kv_rows(const DeviceRows& fresh, int64_t tokens_per_row, const int32_t* slots, const DeviceRows& cache,
                   int64_t slots_per_row);

}  // namespace nvfp4lm::cuda
