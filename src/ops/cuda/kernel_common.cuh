// Device helpers shared by the CUDA op kernels in this folder (included by .cu files only).
//  - Element types: float (F32), __nv_bfloat16 (BF16), __half (F16). All math is fp32: elements are widened on
//    load and rounded to nearest even on store.
//  - Chunks: a thread handles kChunk = 8 consecutive elements of a row. With `vec` (every row start 16-byte
//    aligned and the width a multiple of 8: see vectorizable()) a chunk is one 16-byte load for 16-bit types
//    and two for F32; otherwise elements are loaded one by one and those past the row end read as 0 and are
//    not stored. `vec` is uniform over a launch, so the branch costs nothing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/grid_stride.h"
#include "ops/cuda/rows.h"

namespace nvfp4lm::cuda::kernels {

using bf16 = __nv_bfloat16;
using f16 = __half;

inline constexpr int kChunk = 8;

// ---- host-side launch helpers ---------------------------------------------------------------------------------

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

// Whether the rows of `rows` can be read in 16-byte chunks of 8 elements.
inline bool vectorizable(const DeviceRows& rows) {
  const auto bytes = static_cast<int64_t>(dtype_size(rows.dtype));
  const bool strides_ok =
      rows.count <= 1 || ((rows.inner_stride * bytes) % 16 == 0 &&
                          (rows.inner_count >= rows.count || (rows.outer_stride * bytes) % 16 == 0));
  return rows.width % kChunk == 0 && reinterpret_cast<uintptr_t>(rows.data) % 16 == 0 && strides_ok;
}

// ---- element conversion ---------------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ float to_float(T value);
template <>
__device__ __forceinline__ float to_float<float>(float value) {
  return value;
}
template <>
__device__ __forceinline__ float to_float<bf16>(bf16 value) {
  return __bfloat162float(value);
}
template <>
__device__ __forceinline__ float to_float<f16>(f16 value) {
  return __half2float(value);
}

template <typename T>
__device__ __forceinline__ T from_float(float value);
template <>
__device__ __forceinline__ float from_float<float>(float value) {
  return value;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float value) {
  return __float2bfloat16_rn(value);
}
template <>
__device__ __forceinline__ f16 from_float<f16>(float value) {
  return __float2half_rn(value);
}

// ---- rows and chunks ------------------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ T* row_ptr(const DeviceRows& rows, int64_t row) {
  return static_cast<T*>(rows.data) + rows.offset(row);
}

// Elements [col, col + 8) of `row` as floats (see the header for `vec`).
template <typename T>
__device__ __forceinline__ void load_chunk(const T* row, int64_t col, int64_t width, bool vec, float (&out)[kChunk]) {
  if (vec) {
    if constexpr (sizeof(T) == 4) {
      const float4 a = *reinterpret_cast<const float4*>(row + col);
      const float4 b = *reinterpret_cast<const float4*>(row + col + 4);
      out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
      out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
    } else {
      const uint4 raw = *reinterpret_cast<const uint4*>(row + col);
      const T* elements = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int k = 0; k < kChunk; ++k) out[k] = to_float(elements[k]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kChunk; ++k) out[k] = col + k < width ? to_float(row[col + k]) : 0.f;
  }
}

template <typename T>
__device__ __forceinline__ void store_chunk(T* row, int64_t col, int64_t width, bool vec, const float (&in)[kChunk]) {
  if (vec) {
    if constexpr (sizeof(T) == 4) {
      *reinterpret_cast<float4*>(row + col) = make_float4(in[0], in[1], in[2], in[3]);
      *reinterpret_cast<float4*>(row + col + 4) = make_float4(in[4], in[5], in[6], in[7]);
    } else {
      uint4 raw;
      T* elements = reinterpret_cast<T*>(&raw);
#pragma unroll
      for (int k = 0; k < kChunk; ++k) elements[k] = from_float<T>(in[k]);
      *reinterpret_cast<uint4*>(row + col) = raw;
    }
  } else {
#pragma unroll
    for (int k = 0; k < kChunk; ++k)
      if (col + k < width) row[col + k] = from_float<T>(in[k]);
  }
}

// Work item `item` of a [count, ceil(width / 8)] grid of chunks: its row and first column.
struct ChunkPosition {
  int64_t row;
  int64_t col;
};
__device__ __forceinline__ ChunkPosition chunk_position(int64_t item, int64_t chunks_per_row) {
  if (chunks_per_row <= 0) return {0, 0};
  const int64_t row = item / chunks_per_row;
  return {row, (item - row * chunks_per_row) * kChunk};
}

// ---- bad-input records (ops/cuda/input_errors.h) ---------------------------------------------------------------

// Records that row `index` held the out-of-range value `value` into a slot of pinned host memory mapped into the
// device. One 64-bit store (no tearing); the first record is kept when writes do not race.
__device__ __forceinline__ void record_input_error(unsigned long long* slot, int64_t index, int32_t value) {
  if (slot == nullptr) return;
  volatile unsigned long long* target = slot;
  if (*target != 0ull) return;
  *target = (1ull << 63) | (static_cast<unsigned long long>(index & 0x7fffffff) << 32) |
            static_cast<unsigned long long>(static_cast<uint32_t>(value));
}

}  // namespace nvfp4lm::cuda::kernels
