// SwiGLU, the gated activation of the Qwen3 MLP:  out = silu(gate) * up,  silu(g) = g / (1 + exp(-g)).
// gate / up / out are [N, F] or [..., F] with free row strides (inner dim contiguous), so gate and up can be
// the two halves of a fused [N, gate|up] projection. Backward (dgate, dup overwritten; they may be the two
// halves of a fused gradient buffer, and may alias gate / up element for element):
//   dup = dout * silu(gate),   dgate = dout * up * sigmoid(gate) * (1 + gate * (1 - sigmoid(gate))).
// Op conventions (shared by ops/*.h): outputs are allocated by the caller; backward ops OVERWRITE activation
// gradients (=) and ACCUMULATE parameter gradients (+=); CPU tensors are F32; shape / dtype / device mismatches
// are internal errors (NVFP4LM_ASSERT).
#pragma once

#include "core/tensor.h"

namespace nvfp4lm {

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out);
void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup);

}  // namespace nvfp4lm
