// DeviceRows: how the CUDA launchers see a tensor operand without seeing a Tensor (host and device code).
// An operand is `count` rows of `width` contiguous elements; row r starts at
//   data + (r / inner_count) * outer_stride + (r % inner_count) * inner_stride      (elements)
// which covers contiguous tensors, row-strided 2-D views (a narrow()ed fused projection) and 3-D views whose
// two leading dims do not collapse (the k heads of a fused [tokens, q+k heads, head_dim] buffer). When
// inner_count >= count the rows are evenly spaced by inner_stride and no division is done.
// Built on the host by ops/cuda/tensor_rows.h (the dispatchers), consumed by the .cu launchers.
#pragma once

#include <cstdint>

#include "core/dtype.h"

#if defined(__CUDACC__)
#define NVFP4LM_ROWS_HD __host__ __device__ __forceinline__
#else
#define NVFP4LM_ROWS_HD inline
#endif

namespace nvfp4lm::cuda {

struct DeviceRows {
  void* data = nullptr;
  DType dtype = DType::F32;
  int64_t count = 0;         // rows
  int64_t width = 0;         // contiguous elements per row
  int64_t inner_count = 0;   // rows per outer group (>= count: evenly spaced rows)
  int64_t inner_stride = 0;  // elements between consecutive rows of a group
  int64_t outer_stride = 0;  // elements between groups

  NVFP4LM_ROWS_HD int64_t offset(int64_t row) const {
    if (inner_count >= count) return row * inner_stride;
    return (row / inner_count) * outer_stride + (row % inner_count) * inner_stride;
  }
  // Every row directly follows the previous one: the operand is one flat run of count * width elements.
  NVFP4LM_ROWS_HD bool dense() const { return count <= 1 || (inner_count >= count && inner_stride == width); }
};

// Evenly spaced rows [count, width] with row stride `ld` (a BLAS-style matrix).
NVFP4LM_ROWS_HD DeviceRows matrix_rows(void* data, DType dtype, int64_t count, int64_t width, int64_t ld) {
  DeviceRows rows;
  rows.data = data;
  rows.dtype = dtype;
  rows.count = count;
  rows.width = width;
  rows.inner_count = count;
  rows.inner_stride = ld;
  return rows;
}

// The same operand seen as one row of count * width elements when it is dense (cheaper indexing, and the
// vectorised path then only needs the total to be a multiple of the vector).
NVFP4LM_ROWS_HD DeviceRows flattened(const DeviceRows& rows) {
  if (!rows.dense()) return rows;
  return matrix_rows(rows.data, rows.dtype, rows.count == 0 ? 0 : 1, rows.count * rows.width, rows.count * rows.width);
}

}  // namespace nvfp4lm::cuda
