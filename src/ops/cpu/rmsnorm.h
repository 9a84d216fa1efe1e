// CPU reference of ops/rmsnorm.h.
#pragma once

#include "core/tensor.h"

namespace nvfp4lm::cpu {

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd);
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight);

}  // namespace nvfp4lm::cpu
