// Host side of DeviceRows (ops/cuda/rows.h): turns a CUDA Tensor into the raw row description the launchers
// take. Included only by the op dispatchers (ops/<op>.cpp, under NVFP4LM_HAS_CUDA), never by .cu files.
// Layout violations are internal contracts (NVFP4LM_ASSERT), as everywhere in ops/.
#pragma once

#include "core/tensor.h"
#include "ops/cuda/rows.h"

namespace nvfp4lm::cuda {

// `tensor` (on a CUDA device) as rows of its trailing `row_rank` dims, which must be contiguous; the leading
// dims may have any strides as long as at most two remain after dropping size-1 dims and merging dims that
// collapse. `what` names the operand in messages.
DeviceRows device_rows(const Tensor& tensor, int row_rank, const char* what);

// A CUDA tensor of rank 2 with unit inner stride as evenly spaced rows (a BLAS matrix); ld >= width.
DeviceRows device_matrix(const Tensor& tensor, const char* what);

// Asserts `tensor` is a contiguous I32 CUDA tensor and returns its data (null when empty).
const int32_t* device_int32(const Tensor& tensor, const char* what);

}  // namespace nvfp4lm::cuda
