#include "core/tensor.h"

#include <cstring>

#include "core/numeric.h"

namespace nvfp4lm {

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t;
  size_t bytes = static_cast<size_t>(shape.numel()) * dtype_bytes(dtype);
  t.storage_ = Storage::allocate(device, bytes);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero();
  return t;
}

Tensor Tensor::external(void* data, const Shape& shape, DType dtype, Device device, std::shared_ptr<void> owner) {
  Tensor t;
  size_t bytes = static_cast<size_t>(shape.numel()) * dtype_bytes(dtype);
  t.storage_ = Storage::external(data, bytes, device, std::move(owner));
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::from_floats(const std::vector<float>& values, const Shape& shape) {
  NVFP4LM_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_floats: {} values for shape {}",
                values.size(), shape.str());
  Tensor t = empty(shape, DType::F32);
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * 4);
  return t;
}

Tensor Tensor::from_ints(const std::vector<int32_t>& values, const Shape& shape) {
  NVFP4LM_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_ints: {} values for shape {}",
                values.size(), shape.str());
  Tensor t = empty(shape, DType::I32);
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * 4);
  return t;
}

int Tensor::normalize_axis(int axis) const {
  int r = rank();
  int a = axis < 0 ? axis + r : axis;
  NVFP4LM_ASSERT(a >= 0 && a < r, "axis {} out of range for rank {}", axis, r);
  return a;
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[static_cast<size_t>(i)] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::raw() const {
  NVFP4LM_ASSERT(storage_ != nullptr, "access to an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

void Tensor::check_host_access(size_t element_bytes) const {
  NVFP4LM_ASSERT(defined(), "access to an undefined tensor");
  NVFP4LM_ASSERT(device().is_cpu(), "host access to a tensor on {}", device().str());
  NVFP4LM_ASSERT(element_bytes == dtype_bytes(dtype_), "host access with element size {} to a {} tensor", element_bytes,
                 dtype_name(dtype_));
}

Tensor Tensor::reshape(const Shape& shape) const {
  NVFP4LM_ASSERT(shape.numel() == numel(), "reshape {} -> {} changes the element count", shape_.str(), shape.str());
  NVFP4LM_ASSERT(is_contiguous(), "reshape of a non-contiguous tensor {}", str());
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::narrow(int axis, int64_t start, int64_t length) const {
  int a = normalize_axis(axis);
  NVFP4LM_ASSERT(start >= 0 && length >= 0 && start + length <= shape_[a], "narrow [{}, {}) of axis {} size {}", start,
                 start + length, a, shape_[a]);
  Tensor t = *this;
  t.offset_bytes_ += static_cast<size_t>(start * strides_[static_cast<size_t>(a)]) * dtype_bytes(dtype_);
  t.shape_[a] = length;
  return t;
}

Tensor Tensor::select(int axis, int64_t index) const {
  int a = normalize_axis(axis);
  Tensor t = narrow(a, index, 1);
  std::vector<int64_t> dims;
  std::array<int64_t, Shape::kMaxRank> strides{};
  int out = 0;
  for (int i = 0; i < rank(); ++i) {
    if (i == a) continue;
    dims.push_back(shape_[i]);
    strides[static_cast<size_t>(out++)] = strides_[static_cast<size_t>(i)];
  }
  t.shape_ = Shape(dims);
  t.strides_ = strides;
  return t;
}

Tensor Tensor::transpose(int axis_a, int axis_b) const {
  int a = normalize_axis(axis_a), b = normalize_axis(axis_b);
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[static_cast<size_t>(a)], t.strides_[static_cast<size_t>(b)]);
  return t;
}

Tensor Tensor::view_as(DType dtype) const {
  NVFP4LM_ASSERT(dtype_bytes(dtype) == dtype_bytes(dtype_), "view_as {} -> {} changes element size", dtype_name(dtype_),
                 dtype_name(dtype));
  Tensor t = *this;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor t = empty(shape_, dtype_, device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor t = empty(shape_, dtype_, target);
  t.copy_from(*this);
  return t;
}

namespace {

// Copies a strided CPU tensor element by element (generic over element size).
void strided_copy_cpu(char* dst, const std::array<int64_t, 4>& dst_strides, const char* src,
                      const std::array<int64_t, 4>& src_strides, const Shape& shape, size_t elem) {
  std::array<int64_t, 4> dims{1, 1, 1, 1};
  std::array<int64_t, 4> ds{0, 0, 0, 0}, ss{0, 0, 0, 0};
  int pad = 4 - shape.rank();
  for (int i = 0; i < shape.rank(); ++i) {
    dims[static_cast<size_t>(pad + i)] = shape[i];
    ds[static_cast<size_t>(pad + i)] = dst_strides[static_cast<size_t>(i)];
    ss[static_cast<size_t>(pad + i)] = src_strides[static_cast<size_t>(i)];
  }
  for (int64_t i0 = 0; i0 < dims[0]; ++i0)
    for (int64_t i1 = 0; i1 < dims[1]; ++i1)
      for (int64_t i2 = 0; i2 < dims[2]; ++i2) {
        const char* s = src + (i0 * ss[0] + i1 * ss[1] + i2 * ss[2]) * static_cast<int64_t>(elem);
        char* d = dst + (i0 * ds[0] + i1 * ds[1] + i2 * ds[2]) * static_cast<int64_t>(elem);
        if (ss[3] == 1 && ds[3] == 1) {
          std::memcpy(d, s, static_cast<size_t>(dims[3]) * elem);
        } else {
          for (int64_t i3 = 0; i3 < dims[3]; ++i3)
            std::memcpy(d + i3 * ds[3] * static_cast<int64_t>(elem), s + i3 * ss[3] * static_cast<int64_t>(elem), elem);
        }
      }
}

}  // namespace

void Tensor::copy_from(const Tensor& src) {
  NVFP4LM_ASSERT(shape_ == src.shape_, "copy {} into {}", src.str(), str());
  NVFP4LM_ASSERT(dtype_ == src.dtype_, "copy {} into {} (use a cast op to change dtype)", src.str(), str());
  if (numel() == 0) return;
  if (is_contiguous() && src.is_contiguous()) {
    copy_bytes(raw(), device(), src.raw(), src.device(), nbytes());
    return;
  }
  if (device().is_cpu() && src.device().is_cpu()) {
    strided_copy_cpu(static_cast<char*>(raw()), strides_, static_cast<const char*>(src.raw()), src.strides_, shape_,
                     dtype_bytes(dtype_));
    return;
  }
  // Strided copies across devices go through a contiguous staging copy on the source device.
  NVFP4LM_ASSERT(src.device().is_cpu() || src.is_contiguous(), "strided copy from {} is not supported", src.str());
  Tensor staged = src.contiguous();
  if (is_contiguous()) {
    copy_bytes(raw(), device(), staged.raw(), staged.device(), nbytes());
  } else {
    NVFP4LM_ASSERT(device().is_cpu(), "strided copy into {} is not supported", str());
    Tensor host = staged.to(Device::cpu());
    strided_copy_cpu(static_cast<char*>(raw()), strides_, static_cast<const char*>(host.raw()), host.strides_, shape_,
                     dtype_bytes(dtype_));
  }
}

void Tensor::zero() {
  if (is_contiguous()) {
    zero_bytes(raw(), device(), nbytes());
    return;
  }
  Tensor zeros_tensor = Tensor::zeros(shape_, dtype_, device());
  copy_from(zeros_tensor);
}

std::string Tensor::str() const {
  if (!defined()) return "<undefined tensor>";
  return fmt::format("{}{} {}", dtype_name(dtype_), shape_.str(), device().str());
}

std::vector<float> to_float_vector(const Tensor& tensor) {
  NVFP4LM_ASSERT(tensor.device().is_cpu(), "to_float_vector needs a CPU tensor, got {}", tensor.str());
  Tensor t = tensor.contiguous();
  std::vector<float> values(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::F32:
      std::memcpy(values.data(), t.raw(), values.size() * 4);
      break;
    case DType::BF16: {
      const uint16_t* p = t.data<uint16_t>();
      for (size_t i = 0; i < values.size(); ++i) values[i] = bf16_to_float(p[i]);
      break;
    }
    case DType::F16: {
      const uint16_t* p = t.data<uint16_t>();
      for (size_t i = 0; i < values.size(); ++i) values[i] = f16_to_float(p[i]);
      break;
    }
    default:
      NVFP4LM_FAIL("to_float_vector: {} is not a float tensor", tensor.str());
  }
  return values;
}

void convert_cpu(const Tensor& src, Tensor& dst) {
  NVFP4LM_ASSERT(src.shape() == dst.shape(), "convert {} -> {}", src.str(), dst.str());
  NVFP4LM_ASSERT(dst.is_contiguous() && dst.device().is_cpu() && src.device().is_cpu(), "convert {} -> {}", src.str(),
                 dst.str());
  Tensor s = src.contiguous();
  const int64_t n = s.numel();
  if (s.dtype() == dst.dtype()) {
    dst.copy_from(s);
    return;
  }
  NVFP4LM_CHECK(dtype_is_float(s.dtype()) && dtype_is_float(dst.dtype()), "convert: {} -> {} is not a float conversion",
                s.str(), dst.str());
  // Everything goes through fp32 (exact for BF16/F16 -> F32).
  auto load = [&](int64_t i) -> float {
    switch (s.dtype()) {
      case DType::F32:
        return static_cast<const float*>(s.raw())[i];
      case DType::BF16:
        return bf16_to_float(static_cast<const uint16_t*>(s.raw())[i]);
      default:
        return f16_to_float(static_cast<const uint16_t*>(s.raw())[i]);
    }
  };
  switch (dst.dtype()) {
    case DType::F32: {
      float* d = static_cast<float*>(dst.raw());
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) d[i] = load(i);
      break;
    }
    case DType::BF16: {
      uint16_t* d = static_cast<uint16_t*>(dst.raw());
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(load(i));
      break;
    }
    case DType::F16: {
      uint16_t* d = static_cast<uint16_t*>(dst.raw());
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_f16(load(i));
      break;
    }
    default:
      break;
  }
}

}  // namespace nvfp4lm
