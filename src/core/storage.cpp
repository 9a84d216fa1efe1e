#include "core/storage.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/memory.h"
#if NVFP4LM_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

namespace nvfp4lm {
namespace {

#if !NVFP4LM_HAS_CUDA
[[noreturn]] void no_cuda() {
  NVFP4LM_FAIL(
      "this build of nvfp4lm has no CUDA support (configured with NVFP4LM_CUDA=OFF or without nvcc); "
      "use --device cpu or rebuild with the CUDA toolkit installed");
}
#endif

}  // namespace

std::shared_ptr<Storage> Storage::allocate(Device device, size_t bytes) {
  MemoryTracker::instance().reserve(device, bytes);
  void* data = nullptr;
  try {
    if (device.is_cpu()) {
      NVFP4LM_CHECK(bytes <= (size_t{1} << 60), "refusing to allocate {} bytes of host memory (a size overflow?)",
                    bytes);
      size_t rounded = (bytes + 63) / 64 * 64;
      data = rounded == 0 ? nullptr : std::aligned_alloc(64, rounded);
      NVFP4LM_CHECK(rounded == 0 || data != nullptr, "out of host memory allocating {:.1f} MiB", to_mib(bytes));
    } else {
#if NVFP4LM_HAS_CUDA
      data = cuda::device_malloc(device.index, bytes);
#else
      no_cuda();
#endif
    }
  } catch (...) {
    MemoryTracker::instance().release(device, bytes);
    throw;
  }
  return std::shared_ptr<Storage>(new Storage(data, bytes, device, true, nullptr));
}

std::shared_ptr<Storage> Storage::external(void* data, size_t bytes, Device device, std::shared_ptr<void> owner) {
  return std::shared_ptr<Storage>(new Storage(data, bytes, device, false, std::move(owner)));
}

Storage::~Storage() {
  if (!owned_) return;
  if (device_.is_cpu()) {
    std::free(data_);
  } else {
#if NVFP4LM_HAS_CUDA
    cuda::device_free(device_.index, data_, bytes_);
#endif
  }
  MemoryTracker::instance().release(device_, bytes_);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if NVFP4LM_HAS_CUDA
  cuda::copy(dst, dst_device.is_cuda(), src, src_device.is_cuda(), bytes);
#else
  no_cuda();
#endif
}

void zero_bytes(void* dst, Device device, size_t bytes) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    std::memset(dst, 0, bytes);
    return;
  }
#if NVFP4LM_HAS_CUDA
  cuda::memset_zero(dst, bytes);
#else
  no_cuda();
#endif
}

}  // namespace nvfp4lm
