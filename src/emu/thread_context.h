// The identity of the emulated CUDA thread that is running on this OS thread: what threadIdx, blockIdx, blockDim
// and gridDim read in an emulated kernel (device_api.h). The block runner points current_thread at the running
// fiber's record before every switch into it; outside a kernel it is null.
#pragma once

#include <vector_types.h>

#include <cstdint>

namespace nvfp4lm::emu {

class BlockRunner;

struct ThreadContext {
  uint3 thread_idx{};
  uint3 block_idx{};
  dim3 block_dim;
  dim3 grid_dim;
  int linear = 0;             // thread_idx.x + block_dim.x * (thread_idx.y + block_dim.y * thread_idx.z)
  int lane = 0;               // linear % 32
  int warp = 0;               // linear / 32
  uint32_t block_linear = 0;  // block_idx.x + grid_dim.x * (block_idx.y + grid_dim.y * block_idx.z)
  BlockRunner* block = nullptr;
};

extern thread_local ThreadContext* current_thread;

// Reports device code running outside a kernel (a __device__ function called from host code) and aborts.
[[noreturn]] void outside_kernel(const char* what);

inline ThreadContext& this_thread() {
  ThreadContext* context = current_thread;
  if (context == nullptr) [[unlikely]]
    outside_kernel("threadIdx / blockIdx / a device intrinsic");
  return *context;
}

}  // namespace nvfp4lm::emu
