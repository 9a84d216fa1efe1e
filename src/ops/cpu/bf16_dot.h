// Dot products of a few fp32 activation rows with BF16 weight rows: the CPU decode step's lm_head when the tied
// embedding is kept in BF16 (half the bytes an fp32 copy reads, and the same values: a BF16 weight is exact in fp32,
// so results equal the fp32 reference up to summation order). Variants as in ops/cpu/bf16_gemm.h (avx512bf16 runs
// the avx512f code: the activations stay fp32 here); tests run every one this CPU has.
#pragma once

#include <cstdint>

#include "ops/cpu/bf16_gemm.h"

namespace nvfp4lm::cpu {

struct Bf16Rows {
  const uint16_t* data;  // row o at data + o * ld
  int64_t ld;
  int64_t cols;
};

// y_rows[r][o] = Σ_k x_rows[r][k] * w[o][k] for o in [first, last), r < n (1 <= n <= 8).
void bf16_dot_rows(Bf16Isa isa, const Bf16Rows& w, int64_t first, int64_t last, const float* const* x_rows,
                   float* const* y_rows, int n);

}  // namespace nvfp4lm::cpu
