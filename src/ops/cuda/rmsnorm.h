// CUDA twin of ops/rmsnorm.h as raw-pointer launchers (ops/rmsnorm.cpp checks and dispatches).
// Dtypes: x / y / dy / dx F32 or BF16 (one dtype per call), weight F32 [width] contiguous, rstd F32 [rows]
// contiguous, dweight F32 [width] (accumulated +=). All math in fp32.
// Rows are handled by groups of 1-32 lanes (the smallest power of two covering width / 8, so a 128-wide QK-norm
// head takes 16 lanes and a 2560-wide hidden row a full warp); the row's sum is a shuffle reduction in the group.
// Backward, per row with r = rstd and g = dy * weight:
//   dx = r * g - x * r^3 * (g . x) / width      (overwritten; dx may alias dy)
//   dweight += sum over rows of dy * x * r      (deterministic two-stage reduction, no atomics: each block owns a
//                                                fixed range of rows and writes its column sums to scratch; a
//                                                second kernel adds the block sums in block order)
// The row ranges depend only on (rows, width), so dweight is bitwise reproducible. Runs on cuda::stream().
#pragma once

#include <cstddef>

#include "ops/cuda/rows.h"

namespace nvfp4lm::cuda {

// y = x * rstd * weight (y may alias x); rstd may be null.
void rmsnorm_forward(const DeviceRows& x, const float* weight, float eps, const DeviceRows& y, float* rstd);

// Scratch (device memory) the backward needs for `rows` rows of `width`.
size_t rmsnorm_backward_scratch_bytes(int64_t rows, int64_t width);
void rmsnorm_backward(const DeviceRows& dy, const DeviceRows& x, const float* weight, const float* rstd,
                      const DeviceRows& dx, float* dweight, void* scratch);

}  // namespace nvfp4lm::cuda
