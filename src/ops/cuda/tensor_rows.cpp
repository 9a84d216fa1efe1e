// Tensor -> DeviceRows for the CUDA dispatchers (see tensor_rows.h).
#include "ops/cuda/tensor_rows.h"

#include <algorithm>
#include <vector>

namespace nvfp4lm::cuda {
namespace {

void check_cuda(const Tensor& tensor, const char* what) {
  NVFP4LM_ASSERT(tensor.defined(), "{}: undefined tensor", what);
  NVFP4LM_ASSERT(tensor.device().is_cuda(), "{}: {} is not on a CUDA device", what, tensor.str());
}

}  // namespace

DeviceRows device_rows(const Tensor& tensor, int row_rank, const char* what) {
  check_cuda(tensor, what);
  const int rank = tensor.rank();
  NVFP4LM_ASSERT(row_rank >= 1 && row_rank <= rank, "{}: rows of rank {} in {}", what, row_rank, tensor.str());
  DeviceRows rows;
  rows.data = tensor.numel() > 0 ? tensor.raw() : nullptr;
  rows.dtype = tensor.dtype();
  rows.width = 1;
  for (int axis = rank - 1; axis >= rank - row_rank; --axis) {
    NVFP4LM_ASSERT(tensor.dim(axis) == 1 || tensor.stride(axis) == rows.width,
                   "{}: the last {} dim(s) of {} must be contiguous (stride of dim {} is {}, expected {})", what,
                   row_rank, tensor.str(), axis, tensor.stride(axis), rows.width);
    rows.width *= tensor.dim(axis);
  }
  // Leading dims, outermost first, without size-1 dims, merged where they collapse.
  std::vector<int64_t> dims, strides;
  rows.count = 1;
  for (int axis = 0; axis < rank - row_rank; ++axis) {
    rows.count *= tensor.dim(axis);
    if (tensor.dim(axis) == 1) continue;
    if (!dims.empty() && strides.back() == tensor.stride(axis) * tensor.dim(axis)) {
      dims.back() *= tensor.dim(axis);
      strides.back() = tensor.stride(axis);
      continue;
    }
    dims.push_back(tensor.dim(axis));
    strides.push_back(tensor.stride(axis));
  }
  NVFP4LM_ASSERT(dims.size() <= 2, "{}: the leading dims of {} form {} independent strides (at most 2 supported)", what,
                 tensor.str(), dims.size());
  if (dims.empty()) {
    rows.inner_count = rows.count;
    rows.inner_stride = rows.width;
  } else if (dims.size() == 1) {
    rows.inner_count = rows.count;
    rows.inner_stride = strides[0];
  } else {
    rows.inner_count = dims[1];
    rows.inner_stride = strides[1];
    rows.outer_stride = strides[0];
  }
  return rows;
}

DeviceRows device_matrix(const Tensor& tensor, const char* what) {
  check_cuda(tensor, what);
  NVFP4LM_ASSERT(tensor.rank() == 2 && (tensor.dim(1) <= 1 || tensor.stride(1) == 1),
                 "{}: {} must be a 2-D matrix with unit inner stride", what, tensor.str());
  const int64_t count = tensor.dim(0), width = tensor.dim(1);
  // A single row may carry any stride; BLAS-style consumers want ld >= width.
  const int64_t ld = count <= 1 ? std::max<int64_t>(width, 1) : tensor.stride(0);
  NVFP4LM_ASSERT(ld >= width, "{}: rows of {} overlap (row stride {} < {} columns)", what, tensor.str(), ld, width);
  return matrix_rows(tensor.numel() > 0 ? tensor.raw() : nullptr, tensor.dtype(), count, width, ld);
}

const int32_t* device_int32(const Tensor& tensor, const char* what) {
  check_cuda(tensor, what);
  NVFP4LM_ASSERT(tensor.dtype() == DType::I32 && tensor.is_contiguous(), "{}: {} must be a contiguous I32 tensor", what,
                 tensor.str());
  return tensor.numel() > 0 ? static_cast<const int32_t*>(tensor.raw()) : nullptr;
}

}  // namespace nvfp4lm::cuda
