// A block of bytes on one device, shared by every Tensor view of it. Owned storage is allocated through
// the memory tracker (counted, limit-checked); external storage (a mmap'd file) is kept alive by an
// owner handle and not counted.
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"

namespace nvfp4lm {

class Storage {
 public:
  // Allocates `bytes` on `device` (64-byte aligned on CPU, cudaMalloc alignment on CUDA). Uninitialized.
  static std::shared_ptr<Storage> allocate(Device device, size_t bytes);
  // Wraps memory that something else owns; `owner` is held until the last view is gone.
  static std::shared_ptr<Storage> external(void* data, size_t bytes, Device device, std::shared_ptr<void> owner);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool owned() const { return owned_; }

 private:
  Storage(void* data, size_t bytes, Device device, bool owned, std::shared_ptr<void> owner)
      : data_(data), bytes_(bytes), device_(device), owned_(owned), owner_(std::move(owner)) {}

  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  bool owned_ = false;
  std::shared_ptr<void> owner_;
};

// Raw copies between devices (contiguous byte ranges). Synchronous with respect to the host.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
void zero_bytes(void* dst, Device device, size_t bytes);

}  // namespace nvfp4lm
