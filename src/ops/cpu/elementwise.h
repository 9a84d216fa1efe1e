// CPU reference of ops/elementwise.h.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace nvfp4lm::cpu {

void add(const Tensor& a, const Tensor& b, Tensor& out);
void mul_inplace(Tensor& a, const Tensor& b);
void scale_inplace(Tensor& a, float s);
void fill(Tensor& a, float value);
void cast(const Tensor& src, Tensor& dst);
void dropout(const Tensor& src, Tensor& dst, float p, uint64_t seed, bool accumulate);
double sum_squares(const Tensor& a);

}  // namespace nvfp4lm::cpu
