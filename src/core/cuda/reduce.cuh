// Warp and block reductions shared by the CUDA kernels of every layer (included by .cu files only).
// Every reduction is a fixed tree: xor shuffles with offsets 16, 8, 4, 2, 1 inside a warp, then the warps' values
// in warp order. The same inputs therefore give the same bits on every run, launch and schedule, and a kernel that
// switches to these helpers keeps the summation order it had (which tests compare bit for bit).
// All helpers must be reached by every thread they name (the whole warp, the lane group or the block).
#pragma once

#include <cuda_runtime.h>

namespace nvfp4lm::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;

// Sum over the warp; every lane receives it.
template <typename T>
__device__ __forceinline__ T warp_sum(T value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

// fmaxf over the warp; every lane receives it.
__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

// Rows handled by groups of `lanes` lanes (a power of two <= 32, groups aligned inside the warp): the shuffle
// mask of this thread's group, and a sum over the group that every lane of it receives. Only the group's lanes
// need to take part, so groups of one warp may stop at different times.
__device__ __forceinline__ unsigned group_mask(int lanes) {
  if (lanes >= 32) return kFullMask;
  const unsigned base = (threadIdx.x % 32) / lanes * lanes;
  return ((1u << lanes) - 1u) << base;
}

__device__ __forceinline__ float group_sum(float value, int lanes, unsigned mask) {
  for (int offset = lanes / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(mask, value, offset, lanes);
  return value;
}

// Block-wide sum (blockDim.x a multiple of 32, at most 1024); the result is valid in thread 0. `scratch` holds 32
// doubles of shared memory and may be reused as soon as this returns.
__device__ __forceinline__ double block_sum(double value, double* scratch) {
  value = warp_sum(value);
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < warps ? scratch[lane] : 0.0;
    value = warp_sum(value);
  }
  __syncthreads();  // scratch may be reused right after
  return value;
}

// Block-wide fmaxf (blockDim.x a multiple of 32, at most 1024); every thread receives it, folded from its own warp's
// maximum over the warps in order. `scratch` holds 32 floats of shared memory and may be reused as soon as this
// returns.
__device__ __forceinline__ float block_max(float value, float* scratch) {
  value = warp_max(value);
  const int warps = static_cast<int>(blockDim.x / 32);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  for (int w = 0; w < warps; ++w) value = fmaxf(value, scratch[w]);
  __syncthreads();  // scratch may be reused right after
  return value;
}

}  // namespace nvfp4lm::cuda
