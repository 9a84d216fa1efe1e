#include "core/cuda/runtime.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "core/cuda/check.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/memory.h"
#include "core/memory_guard.h"

#if NVFP4LM_CUDA_EMULATION
#include "core/cuda/emulation.h"
#endif

namespace nvfp4lm::cuda {

void fail(cudaError_t status, const char* expr, const char* file, int line) {
  throw Error(fmt::format("CUDA error {} ({}) in `{}` at {}:{}", cudaGetErrorName(status), cudaGetErrorString(status),
                          expr, file, line));
}

void fail_cublas(int status, const char* expr, const char* file, int line) {
  throw Error(fmt::format("cuBLAS error {} in `{}` at {}:{}", status, expr, file, line));
}

std::string emulation_summary() {
#if NVFP4LM_CUDA_EMULATION
  return emulated::settings_summary();
#else
  return {};
#endif
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are not confused
    return 0;
  }
  return count;
}

namespace {

// True when the CUDA driver library is not on this machine at all.
bool dlopen_driver_missing() {
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) return true;
  dlclose(handle);
  return false;
}

}  // namespace

std::string unavailable_reason() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    const std::string detail = fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
    // The runtime says "insufficient driver" both for an old driver and for none at all; tell them apart.
    if (status == cudaErrorInsufficientDriver && dlopen_driver_missing())
      return "no NVIDIA driver is installed (libcuda.so.1 cannot be loaded; the CUDA runtime reports " + detail + ")";
    return detail;
  }
  return count == 0 ? "the CUDA driver reports no GPU" : "";
}

DeviceInfo device_info(int index) {
  require_device(index);
  cudaDeviceProp prop{};
  NVFP4LM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.sm_major = prop.major;
  info.sm_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.total_bytes = prop.totalGlobalMem;
  info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  info.shared_per_block_optin = prop.sharedMemPerBlockOptin;
  info.integrated = prop.integrated != 0;
  int current = 0;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&current));
  NVFP4LM_CUDA_CHECK(cudaSetDevice(index));
  size_t free_bytes = 0, total_bytes = 0;
  NVFP4LM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  NVFP4LM_CUDA_CHECK(cudaSetDevice(current));
  info.free_bytes = free_bytes;
  NVFP4LM_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  NVFP4LM_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  return info;
}

void require_device(int index) {
  int count = device_count();
  NVFP4LM_CHECK(count > 0,
                "--device cuda:{} was asked for but no GPU is usable: {}; run `nvfp4lm diagnose` or use "
                "--device cpu",
                index, unavailable_reason());
  NVFP4LM_CHECK(index >= 0 && index < count, "--device cuda:{} does not exist: {} GPU(s) found (cuda:0..cuda:{})",
                index, count, count - 1);
}

size_t device_memory_in_use(int index) {
  int current = 0;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&current));
  if (current != index) NVFP4LM_CUDA_CHECK(cudaSetDevice(index));
  size_t free_bytes = 0, total_bytes = 0;
  NVFP4LM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (current != index) NVFP4LM_CUDA_CHECK(cudaSetDevice(current));
  return total_bytes - std::min(free_bytes, total_bytes);
}

namespace {

// Blocks are rounded to 512 B (small) or 2 MiB (large) so that freed blocks are reusable by similar requests.
size_t round_size(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t(2) << 20;
  if (bytes < kLarge) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

struct Cache {
  std::mutex mutex;
  std::map<int, std::multimap<size_t, void*>> free_blocks;  // device -> size -> block
  std::map<int, cudaStream_t> streams;
  std::vector<HeldBlock>* held = nullptr;  // while a graph is being captured: frees go here (graph.h)
};

Cache& cache() {
  static Cache* instance = new Cache();  // never destroyed: frees at exit would race the driver's teardown
  return *instance;
}

void release_cached_locked(Cache& c) {
  for (auto& [device, blocks] : c.free_blocks) {
    cudaSetDevice(device);
    for (auto& block : blocks) cudaFree(block.second);
    blocks.clear();
  }
}

}  // namespace

void* device_malloc(int index, size_t bytes) {
  if (bytes == 0) return nullptr;
  Cache& c = cache();
  size_t size = round_size(bytes);
  std::unique_lock lock(c.mutex);
  auto& blocks = c.free_blocks[index];
  auto it = blocks.find(size);
  if (it != blocks.end()) {
    void* ptr = it->second;
    blocks.erase(it);
    return ptr;
  }
  NVFP4LM_CUDA_CHECK(cudaSetDevice(index));
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, size);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    NVFP4LM_CUDA_CHECK(cudaDeviceSynchronize());
    release_cached_locked(c);
    status = cudaMalloc(&ptr, size);
  }
  // Anything but out-of-memory (a sticky error from an earlier kernel, say) is reported as what it is.
  if (status != cudaSuccess && status != cudaErrorMemoryAllocation) NVFP4LM_CUDA_CHECK(status);
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    NVFP4LM_FAIL(
        "out of GPU memory on cuda:{} allocating {:.1f} MiB in phase '{}' ({:.2f} GiB counted in use, "
        "{:.2f} GiB free of {:.2f} GiB): reduce batch size or sequence length, or use --recompute block",
        index, to_mib(bytes), MemoryTracker::instance().current_phase(),
        to_gib(MemoryTracker::instance().current_bytes(Device::cuda(index))), to_gib(free_bytes), to_gib(total_bytes));
  }
  // The device's memory grew: a memory guard (core/memory_guard.h) in immediate mode reads it now, outside the
  // cache's lock (it reads the driver); the block is handed out either way, and a trip stops the next allocation.
  lock.unlock();
  memory_guard_after_device_allocation(index);
  return ptr;
}

void device_free(int index, void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  if (c.held != nullptr) {
    c.held->push_back({index, ptr, bytes});
    return;
  }
  c.free_blocks[index].emplace(round_size(bytes), ptr);
}

void hold_frees(std::vector<HeldBlock>* held) {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  NVFP4LM_ASSERT(held == nullptr || c.held == nullptr, "hold_frees: a capture is already holding frees");
  c.held = held;
}

void* current_stream_handle() {
  int device = 0;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&device));
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  auto it = c.streams.find(device);
  if (it != c.streams.end()) return it->second;
  cudaStream_t s = nullptr;
  NVFP4LM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  c.streams[device] = s;
  return s;
}

void copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes) {
  cudaMemcpyKind kind = dst_on_device ? (src_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                      : (src_on_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  cudaStream_t s = stream();
  NVFP4LM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
  if (!dst_on_device) NVFP4LM_CUDA_CHECK(cudaStreamSynchronize(s));
}

void memset_zero(void* dst, size_t bytes) { NVFP4LM_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream())); }

void synchronize() { NVFP4LM_CUDA_CHECK(cudaStreamSynchronize(stream())); }

}  // namespace nvfp4lm::cuda
