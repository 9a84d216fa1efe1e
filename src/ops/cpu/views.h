// How the CPU reference reads its operands. Ops see a tensor either as
//  - RowsF32: `count` rows of `width` contiguous floats; the trailing `row_rank` dims form a row and must be
//    contiguous, the leading dims may have any strides (views into fused projections or a KV cache), or
//  - MatrixF32: a BLAS matrix (rows, cols, leading dimension `ld`): unit inner stride, leading dims that
//    collapse into one row stride (a row-strided 2-D view, or a contiguous tensor of any rank).
// Both assert CPU + F32 + layout: these are internal contracts between the model and the ops.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace nvfp4lm::cpu {

class RowsF32 {
 public:
  RowsF32(const Tensor& tensor, int row_rank, const char* what);

  int64_t count() const { return count_; }
  int64_t width() const { return width_; }
  // Rows are evenly spaced (always true for 2-D views); then row(i) = data() + i * uniform_stride().
  bool uniform() const { return uniform_stride_ >= 0; }
  float* data() const { return base_; }
  int64_t uniform_stride() const { return uniform_stride_; }

  float* row(int64_t index) const {
    if (uniform_stride_ >= 0) return base_ + index * uniform_stride_;
    int64_t offset = 0;
    for (int axis = lead_rank_ - 1; axis >= 0; --axis) {
      const auto a = static_cast<size_t>(axis);
      offset += (index % lead_dims_[a]) * lead_strides_[a];
      index /= lead_dims_[a];
    }
    return base_ + offset;
  }

 private:
  float* base_ = nullptr;
  int64_t count_ = 0;
  int64_t width_ = 0;
  int lead_rank_ = 0;
  std::array<int64_t, 4> lead_dims_{};
  std::array<int64_t, 4> lead_strides_{};
  int64_t uniform_stride_ = -1;
};

struct MatrixF32 {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;  // elements between consecutive rows, >= cols

  float* row(int64_t index) const { return data + index * ld; }
};

// Rank >= 1 (rank 1 is one row). Asserts the layout described above.
MatrixF32 as_matrix(const Tensor& tensor, const char* what);

// Pointer to a contiguous CPU I32 tensor (ids, positions, targets, segment ids).
const int32_t* int32_data(const Tensor& tensor, const char* what);

}  // namespace nvfp4lm::cpu
