// The CUDA runtime as the rest of nvfp4lm sees it, with no CUDA headers: device discovery, the caching
// allocator behind Tensor storage, copies, and the one stream per device that all kernels use (the
// "device context", the second piece of global state we allow). Only built when CUDA is.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace nvfp4lm::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
  size_t l2_bytes = 0;
  size_t shared_per_block_optin = 0;
  // An integrated GPU (the DGX Spark's GB10, Jetson): its memory is the host's (cudaDeviceProp::integrated), so
  // total_bytes / free_bytes are the host's too.
  bool integrated = false;
  int driver_version = 0;   // e.g. 13000
  int runtime_version = 0;  // e.g. 13000
};

// In the emulated build (NVFP4LM_CUDA=EMULATE) how the emulated device runs ("schedule warp-serial, 1 worker,
// deferred streams"); "" in a real CUDA build.
std::string emulation_summary();

// Number of usable GPUs; 0 when there is no driver or no device (never throws).
int device_count();
// Why device_count() is 0, in words ("no CUDA driver", "no device", ...); empty when there are devices.
std::string unavailable_reason();
DeviceInfo device_info(int index);
// Throws Error naming the reason when `index` is not a usable GPU.
void require_device(int index);

// The device's memory in use as the driver reports it (cudaMemGetInfo total - free: every process's allocations, the
// contexts, the caching allocator's free blocks), for the memory guard (core/memory_guard.h).
size_t device_memory_in_use(int index);

// Caching allocator: freed blocks are kept for reuse (no cudaFree in steady state). On cudaMalloc failure the
// cache is emptied and the allocation retried once; a real out-of-memory throws Error with the sizes.
void* device_malloc(int index, size_t bytes);
void device_free(int index, void* ptr, size_t bytes);
// While a CUDA graph is captured (graph.h) a freed block must not be handed out again: the graph's replays still
// use it. hold_frees(list) makes device_free append to `list` instead of caching (nullptr ends that); the graph
// frees the list's blocks when it is destroyed.
struct HeldBlock {
  int index = 0;
  void* ptr = nullptr;
  size_t bytes = 0;
};
void hold_frees(std::vector<HeldBlock>* held);

// Stream-ordered copy on stream(). A copy to the host waits for its data; device-to-device and host-to-device
// copies return at once (CUDA stages a pageable host source before cudaMemcpyAsync returns, so the caller may
// reuse it; host Tensors are pageable). A decode step then costs no host round trip per KV-cache write.
void copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes);
void memset_zero(void* dst, size_t bytes);
void synchronize();

// The stream all nvfp4lm kernels of the current device run on, as an opaque handle (cudaStream_t).
void* current_stream_handle();

}  // namespace nvfp4lm::cuda
