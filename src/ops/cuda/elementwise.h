// CUDA twin of ops/elementwise.h as raw-pointer launchers (ops/elementwise.cpp checks and dispatches).
// Operands are DeviceRows (ops/cuda/rows.h) of F32, BF16 or F16, math in fp32, results rounded to nearest even;
// 16-byte vector loads when every row allows it (vectorizable), and dense operands are walked as one flat run.
// Everything runs on cuda::stream(); only sum_squares synchronises (its result comes back to the host).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/cuda/rows.h"

namespace nvfp4lm::cuda {

// out = a + b; one dtype for all three; out may alias a or b element for element.
void add(const DeviceRows& a, const DeviceRows& b, const DeviceRows& out);
// out = a * b; as add.
void mul(const DeviceRows& a, const DeviceRows& b, const DeviceRows& out);
// a *= s.
void scale(const DeviceRows& a, float s);
// a = value (rounded to a's dtype).
void fill(const DeviceRows& a, float value);
// dst = src converted between F32, BF16 and F16 (same count and width; any pair of dtypes, equal ones copy).
void cast(const DeviceRows& src, const DeviceRows& dst);

// dst (= or += with accumulate) the inverted dropout of src (ops/elementwise.h: the mask of element (r, c) is
// counter_uniform(seed, r · width + c) >= p); one dtype for both.
void dropout(const DeviceRows& src, const DeviceRows& dst, float p, uint64_t seed, bool accumulate);

// sum of a^2: each of a fixed number of blocks sums a fixed share of the elements (fp32 within 8-element chunks,
// double across them), then one block adds the block sums in order, in double. The split depends only on the
// shape, so the result is bitwise reproducible. `scratch` is sum_squares_scratch_bytes() of device memory.
size_t sum_squares_scratch_bytes();
double sum_squares(const DeviceRows& a, void* scratch);

}  // namespace nvfp4lm::cuda
