// CPU reference of ops/swiglu.h.
#pragma once

#include "core/tensor.h"
#include "ops/cpu/kernel_family.h"

namespace nvfp4lm::cpu {

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out);
void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup);
// The row kernels' variants (per x86-64 level, ops/cpu/x86/levels.h) and the one these run.
const KernelFamilyInfo& swiglu_kernel_family();

}  // namespace nvfp4lm::cpu
