// The SwiGLU arithmetic of every CUDA kernel that computes it (swiglu.cu, and the gate/up GEMV's epilogue in
// nvfp4_linear.cu), written once so that the fused decode path gives the bits of the op sequence it replaces:
// the same expressions compile to the same instructions (nvcc contracts a * b + c the same way in both places).
#pragma once

#include <cuda_runtime.h>

namespace nvfp4lm::cuda::kernels {

__device__ __forceinline__ float sigmoid(float g) { return 1.f / (1.f + __expf(-g)); }

// silu(gate) * up.
__device__ __forceinline__ float swiglu_value(float gate, float up) { return gate * sigmoid(gate) * up; }

// d(out)/d(gate) and d(out)/d(up), times dout.
__device__ __forceinline__ void swiglu_gradients(float dout, float gate, float up, float& dgate, float& dup) {
  const float sig = sigmoid(gate);
  dup = dout * gate * sig;
  dgate = dout * up * sig * (1.f + gate * (1.f - sig));
}

}  // namespace nvfp4lm::cuda::kernels
