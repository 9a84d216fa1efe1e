// CPU linear layer with LinearRows::Independent (ops/gemm.h): y [N, out] = x [N, in] · wᵀ for a dense F32 weight,
// every row computed by dense_dot_rows on its own (ops/cpu/dense_dot.h), the weight read once per tile for all
// rows (ops/cpu/row_groups.h).
#pragma once

#include "core/tensor.h"

namespace nvfp4lm::cpu {

// x [N, in], w [out, in], y [N, out]: 2-D F32 CPU views with unit inner stride; shapes were checked by the dispatcher.
void linear_forward_independent_rows(const Tensor& x, const Tensor& w, Tensor& y);

}  // namespace nvfp4lm::cpu
