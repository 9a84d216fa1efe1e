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
  // numel(), contiguous_strides() and every byte count made from them can then never overflow: a shape is
  // refused here when its non-zero dimensions multiply past 2^56, far beyond any memory, before anything is sized
  // from it. Zero dimensions do not count: [0, 2^40, 2^40] holds no element, yet its strides would wrap.
  int64_t nonzero_product = 1;
  for (int i = 0; i < rank_; ++i) {
    const int64_t dim = dims_[static_cast<size_t>(i)];
    if (dim == 0) continue;
    NVFP4LM_CHECK(!__builtin_mul_overflow(nonzero_product, dim, &nonzero_product) && nonzero_product <= kMaxNumel,
                  "shape {} is absurd: its non-zero dimensions multiply past 2^56 (a size computed from a wrong or "
                  "hostile value?)",
                  str());
  }
}

int64_t Shape::numel() const {
  // Checked again: operator[] can change a dimension after construction. A zero anywhere makes it 0.
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<size_t>(i)] == 0) return 0;
  int64_t count = 1;
  for (int i = 0; i < rank_; ++i) {
    NVFP4LM_CHECK(!__builtin_mul_overflow(count, dims_[static_cast<size_t>(i)], &count) && count <= kMaxNumel,
                  "shape {} has more than 2^56 elements (a size computed from a wrong or hostile value?)", str());
  }
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
    // Checked: operator[] can change a dimension after the constructor's check.
    NVFP4LM_CHECK(!__builtin_mul_overflow(stride, shape[i], &stride), "shape {} has strides past 2^63", shape.str());
  }
  return strides;
}

}  // namespace nvfp4lm
