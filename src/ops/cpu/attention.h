// CPU reference of ops/attention.h.
#pragma once

#include "core/tensor.h"
#include "ops/attention.h"

namespace nvfp4lm::cpu {

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, const AttentionOptions& options,
                       Tensor* lse);
void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
                        const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace nvfp4lm::cpu
