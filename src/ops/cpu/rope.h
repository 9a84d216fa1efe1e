// CPU reference of ops/rope.h.
#pragma once

#include "core/tensor.h"

namespace nvfp4lm::cpu {

// Rotates x [..., H, D] in place by the angles in cos/sin [P, D/2]: token n uses row positions[n], or row n
// when positions is null. inverse = true rotates by the negative angle (the backward).
void rope_rotate(Tensor& x, const Tensor* positions, const Tensor& cos, const Tensor& sin, bool inverse);

}  // namespace nvfp4lm::cpu
