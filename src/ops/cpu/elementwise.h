// CPU reference of ops/elementwise.h.
#pragma once

#include "core/tensor.h"

namespace nvfp4lm::cpu {

void add(const Tensor& a, const Tensor& b, Tensor& out);
void scale_inplace(Tensor& a, float s);
void fill(Tensor& a, float value);
void cast(const Tensor& src, Tensor& dst);
double sum_squares(const Tensor& a);

}  // namespace nvfp4lm::cpu
