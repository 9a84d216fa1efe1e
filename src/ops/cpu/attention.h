// CPU reference of ops/attention.h.
#pragma once

#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/cpu/kernel_family.h"

namespace nvfp4lm::cpu {

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, const AttentionOptions& options,
                       Tensor* lse);
void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
                        const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv);
// The tile kernels' variants (per x86-64 level, ops/cpu/x86/levels.h) and the one these run.
const KernelFamilyInfo& attention_kernel_family();

}  // namespace nvfp4lm::cpu
