// Dot products of a few fp32 activation rows with BF16 weight rows: the CPU decode step's lm_head when the tied
// embedding is kept in BF16 (half the bytes an fp32 copy reads, and the same values: a BF16 weight is exact in fp32,
// so results equal the fp32 reference up to summation order). Variants: avx512f, avx2+fma, scalar (no avx512bf16: the
// activations stay fp32 here); tests run every one this CPU has.
#pragma once

#include <cstdint>

#include "ops/cpu/dot_rows.h"
#include "ops/cpu/kernel_family.h"

namespace nvfp4lm::cpu {

struct Bf16Rows {
  const uint16_t* data;  // row o at data + o * ld
  int64_t ld;
  int64_t cols;
};

using Bf16DotFn = void (*)(const Bf16Rows&, int64_t, int64_t, const float* const*, float* const*);
using Bf16DotFamily = KernelFamily<RowKernels<Bf16DotFn>>;
const Bf16DotFamily& bf16_dot_family();

// y_rows[r][o] = Σ_k x_rows[r][k] * w[o][k] for o in [first, last), r < n (1 <= n <= 8).
void bf16_dot_rows(const Bf16DotFamily::Variant& variant, const Bf16Rows& w, int64_t first, int64_t last,
                   const float* const* x_rows, float* const* y_rows, int n);

}  // namespace nvfp4lm::cpu
