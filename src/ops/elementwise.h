// Small elementwise ops: residual adds, products, scaling, filling, dtype casts, dropout and the sum of squares
// (gradient norms). Operands are [..., dim] with free row strides (inner dim contiguous) unless stated; shapes must
// match. Op conventions (shared by ops/*.h): outputs are allocated by the caller; backward ops OVERWRITE activation
// gradients (=) and ACCUMULATE parameter gradients (+=); CPU tensors are F32; shape / dtype / device mismatches
// are internal errors (NVFP4LM_ASSERT).
// (cast also takes BF16 / F16 on the CPU.)
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace nvfp4lm {

// a += b.
void add_inplace(Tensor& a, const Tensor& b);
// out = a + b (out may alias a or b).
void add(const Tensor& a, const Tensor& b, Tensor& out);
// a *= b (element by element).
void mul_inplace(Tensor& a, const Tensor& b);
// a *= s.
void scale_inplace(Tensor& a, float s);
// a = value.
void fill(Tensor& a, float value);
// dst = src converted between F32, BF16 and F16 (round to nearest even); same shape, same device.
void cast(const Tensor& src, Tensor& dst);
// Inverted dropout with a counter-based mask (core/rng.h counter_uniform): element (r, c) of the [rows, width] operands
// is kept when counter_uniform(seed, r · width + c) >= p, and then scaled by 1 / (1 - p); others are 0. The mask
// depends on (seed, index) alone — not on strides, device or thread count — so a backward (or a recomputed forward)
// regenerates the forward's mask instead of storing it, and dropout is its own backward: the gradient of dst =
// drop(src) is drop(d dst) with the same seed. dst = drop(src), or dst += drop(src) with accumulate; dst must not
// overlap src unless it is src itself. p in [0, 1).
void dropout(const Tensor& src, Tensor& dst, float p, uint64_t seed, bool accumulate = false);
// sum of a^2, accumulated in double (for gradient norms; the order is fixed, so the result does not depend on
// the thread count).
double sum_squares(const Tensor& a);

}  // namespace nvfp4lm
