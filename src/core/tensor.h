// Tensor: a typed, shaped view (rank <= 4, strides in elements) into shared Storage on one device.
// Views (reshape, narrow, select, transpose) share storage and never copy; clone/contiguous/to copy.
// Element access from host code is only valid for CPU tensors (data<T>() checks this).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace nvfp4lm {

class Tensor {
 public:
  Tensor() = default;

  // Uninitialized contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu());
  // A contiguous view over memory owned elsewhere (e.g. a mmap'd file), kept alive by `owner`.
  static Tensor external(void* data, const Shape& shape, DType dtype, Device device, std::shared_ptr<void> owner);
  // CPU F32 tensor holding a copy of `values` (values.size() must equal shape.numel()).
  static Tensor from_floats(const std::vector<float>& values, const Shape& shape);
  static Tensor from_ints(const std::vector<int32_t>& values, const Shape& shape);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int axis) const { return shape_[normalize_axis(axis)]; }
  int64_t stride(int axis) const { return strides_[static_cast<size_t>(normalize_axis(axis))]; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_bytes(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Pointer to the first element (any device).
  void* raw() const;
  // Typed host pointer: CPU only, element size must match.
  template <typename T>
  T* data() const {
    check_host_access(sizeof(T));
    return static_cast<T*>(raw());
  }

  // ---- views (no copy) ----
  Tensor reshape(const Shape& shape) const;  // contiguous only
  Tensor narrow(int axis, int64_t start, int64_t length) const;
  Tensor select(int axis, int64_t index) const;  // drops the axis
  Tensor transpose(int axis_a, int axis_b) const;
  // Reinterpret the bytes as another dtype of the same element size (e.g. U8 <-> E2M1x2 <-> E4M3).
  Tensor view_as(DType dtype) const;

  // ---- copies ----
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(Device device) const;  // returns *this when already there
  // Copies src into this tensor (same shape and dtype; devices may differ; any strides on CPU).
  void copy_from(const Tensor& src);
  void zero();

  // "BF16[2, 3] cuda:0"
  std::string str() const;

 private:
  int normalize_axis(int axis) const;
  void check_host_access(size_t element_bytes) const;

  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  std::array<int64_t, Shape::kMaxRank> strides_{};
  DType dtype_ = DType::F32;
};

// Float values of a CPU tensor of F32/BF16/F16 as fp32 (any strides). For tests and small tensors.
std::vector<float> to_float_vector(const Tensor& tensor);

// Converts between F32, BF16 and F16 on the CPU (RNE); shapes must match, dst contiguous.
void convert_cpu(const Tensor& src, Tensor& dst);

}  // namespace nvfp4lm
