// Row and matrix views of CPU tensors for the reference ops (see views.h).
#include "ops/cpu/views.h"

#include <algorithm>

namespace nvfp4lm::cpu {
namespace {

void check_f32_cpu(const Tensor& tensor, const char* what) {
  NVFP4LM_ASSERT(tensor.defined(), "{}: undefined tensor", what);
  NVFP4LM_ASSERT(tensor.device().is_cpu(), "{}: {} is not on the CPU", what, tensor.str());
  NVFP4LM_ASSERT(tensor.dtype() == DType::F32, "{}: {} must be F32 on the CPU", what, tensor.str());
}

}  // namespace

RowsF32::RowsF32(const Tensor& tensor, int row_rank, const char* what) {
  check_f32_cpu(tensor, what);
  const int rank = tensor.rank();
  NVFP4LM_ASSERT(row_rank >= 1 && row_rank <= rank, "{}: rows of rank {} in {}", what, row_rank, tensor.str());
  base_ = tensor.numel() > 0 ? tensor.data<float>() : nullptr;
  // The row: trailing dims, contiguous (size-1 dims may carry any stride).
  width_ = 1;
  for (int axis = rank - 1; axis >= rank - row_rank; --axis) {
    NVFP4LM_ASSERT(tensor.dim(axis) == 1 || tensor.stride(axis) == width_,
                   "{}: the last {} dim(s) of {} must be contiguous (stride of dim {} is {}, expected {})", what,
                   row_rank, tensor.str(), axis, tensor.stride(axis), width_);
    width_ *= tensor.dim(axis);
  }
  // The leading dims, any strides; size-1 dims dropped.
  count_ = 1;
  for (int axis = 0; axis < rank - row_rank; ++axis) {
    count_ *= tensor.dim(axis);
    if (tensor.dim(axis) == 1) continue;
    lead_dims_[static_cast<size_t>(lead_rank_)] = tensor.dim(axis);
    lead_strides_[static_cast<size_t>(lead_rank_)] = tensor.stride(axis);
    ++lead_rank_;
  }
  bool collapses = true;
  for (int i = 0; i + 1 < lead_rank_; ++i) {
    const auto a = static_cast<size_t>(i);
    collapses = collapses && lead_strides_[a] == lead_strides_[a + 1] * lead_dims_[a + 1];
  }
  if (collapses) uniform_stride_ = lead_rank_ == 0 ? width_ : lead_strides_[static_cast<size_t>(lead_rank_ - 1)];
}

MatrixF32 as_matrix(const Tensor& tensor, const char* what) {
  RowsF32 rows(tensor, 1, what);
  NVFP4LM_ASSERT(rows.uniform(), "{}: {} is not a row-strided matrix (its leading dims do not collapse)", what,
                 tensor.str());
  MatrixF32 m;
  m.data = rows.data();
  m.rows = rows.count();
  m.cols = rows.width();
  // A single row may carry any stride; BLAS wants ld >= cols.
  m.ld = m.rows <= 1 ? std::max<int64_t>(m.cols, 1) : rows.uniform_stride();
  NVFP4LM_ASSERT(m.ld >= m.cols, "{}: rows of {} overlap (row stride {} < {} columns)", what, tensor.str(), m.ld,
                 m.cols);
  return m;
}

const int32_t* int32_data(const Tensor& tensor, const char* what) {
  NVFP4LM_ASSERT(tensor.defined(), "{}: undefined tensor", what);
  NVFP4LM_ASSERT(tensor.device().is_cpu(), "{}: {} is not on the CPU", what, tensor.str());
  NVFP4LM_ASSERT(tensor.dtype() == DType::I32, "{}: {} must be I32", what, tensor.str());
  NVFP4LM_ASSERT(tensor.is_contiguous(), "{}: {} must be contiguous", what, tensor.str());
  return tensor.numel() > 0 ? tensor.data<int32_t>() : nullptr;
}

}  // namespace nvfp4lm::cpu
