// The rotate-half arithmetic of every CUDA kernel that applies RoPE (rope.cu, and the decode step's fused
// QK-norm + RoPE + KV store in qk_norm_rope_store.cu), written once so that the fused kernel gives the bits of the
// op sequence it replaces: the same expressions compile to the same instructions (the same FMA contractions).
#pragma once

#include <cuda_runtime.h>

namespace nvfp4lm::cuda::kernels {

// x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin, with `sn` the signed sine (the inverse rotation passes -sin).
__device__ __forceinline__ void rope_rotate_pair(float x1, float x2, float cs, float sn, float& x1_out, float& x2_out) {
  const float first = x1 * cs - x2 * sn;
  x2_out = x2 * cs + x1 * sn;
  x1_out = first;
}

}  // namespace nvfp4lm::cuda::kernels
