// CPU reference of ops/swiglu.h.
#pragma once

#include "core/tensor.h"

namespace nvfp4lm::cpu {

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out);
void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup);

}  // namespace nvfp4lm::cpu
