// Tensor shapes: rank 0..4, dims in elements, row-major (last dim fastest).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace nvfp4lm {

class Shape {
 public:
  static constexpr int kMaxRank = 4;

  // Largest element count of a shape (2^56): bytes = numel * 8 still fits in int64 and size_t.
  static constexpr int64_t kMaxNumel = int64_t{1} << 56;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t operator[](int axis) const { return dims_[static_cast<size_t>(axis)]; }
  int64_t& operator[](int axis) { return dims_[static_cast<size_t>(axis)]; }
  int64_t numel() const;
  std::vector<int64_t> to_vector() const { return {dims_.begin(), dims_.begin() + rank_}; }
  std::string str() const;  // "[2, 3]"
  bool operator==(const Shape& other) const;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// Row-major strides (in elements) of a contiguous tensor of this shape.
std::array<int64_t, Shape::kMaxRank> contiguous_strides(const Shape& shape);

}  // namespace nvfp4lm
