#include "core/shape.h"

#include "core/error.h"

namespace nvfp4lm {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::vector<int64_t>(dims)) {}

Shape::Shape(const std::vector<int64_t>& dims) {
  NVFP4LM_CHECK(dims.size() <= kMaxRank, "tensor rank {} is not supported (at most {})", dims.size(), kMaxRank);
  rank_ = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    NVFP4LM_CHECK(dims[i] >= 0, "negative dimension {} in shape", dims[i]);
    dims_[i] = dims[i];
  }
}

int64_t Shape::numel() const {
  int64_t count = 1;
  for (int i = 0; i < rank_; ++i) count *= dims_[static_cast<size_t>(i)];
  return count;
}

std::string Shape::str() const {
  std::string text = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) text += ", ";
    text += std::to_string(dims_[static_cast<size_t>(i)]);
  }
  return text + "]";
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<size_t>(i)] != other.dims_[static_cast<size_t>(i)]) return false;
  return true;
}

std::array<int64_t, Shape::kMaxRank> contiguous_strides(const Shape& shape) {
  std::array<int64_t, Shape::kMaxRank> strides{};
  int64_t stride = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    strides[static_cast<size_t>(i)] = stride;
    stride *= shape[i];
  }
  return strides;
}

}  // namespace nvfp4lm
