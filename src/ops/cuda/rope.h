// CUDA twin of the rotation behind ops/rope.h (cpu::rope_rotate's meaning), a raw-pointer launcher called by
// ops/rope.cpp. In place on x: tokens are DeviceRows of [heads * head_dim] elements (F32 or BF16, token stride
// free), every head of token n rotated by the cos / sin row positions[n] (or row n when positions is null) of
// the F32 tables cos, sin [table_rows, head_dim / 2] (contiguous: a RopeTable on the device, or per-call
// angles). inverse = true rotates by the negative angle (the backward). fp32 math.
// A position outside [0, table_rows) leaves that token unrotated and is recorded for the dispatcher to report
// (ops/cuda/input_errors.h). Runs on cuda::stream().
#pragma once

#include <cstdint>

#include "ops/cuda/rows.h"

namespace nvfp4lm::cuda {

void rope_rotate(const DeviceRows& tokens, int64_t heads, int64_t head_dim, const int32_t* positions, const float* cos,
                 const float* sin, int64_t table_rows, bool inverse);

}  // namespace nvfp4lm::cuda
