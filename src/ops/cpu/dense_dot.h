// Dot products of a few activation rows with the rows of a dense F32 weight: y_rows[r][o] = Σ_k x_rows[r][k] · w[o][k].
// The dense twin of nvfp4_dot.h for the decode rows of a linear layer (LinearRows::Independent, ops/gemm.h).
//
// Why not BLAS: OpenBLAS computes one row with sgemv and several with sgemm, in different summation orders, so a
// sequence decoded in a batch would get other logits than decoded alone. Here every output element has one fixed
// order — per-lane partial sums over the columns in steps of the vector width, a masked tail, then the lanes'
// reduction — whatever n is and whichever rows come with it: each row's result is bit for bit the same as alone.
// The weight row is loaded once for all n rows, so n rows cost little more memory traffic than one (a decode step
// is bound by reading the weights). The order is fixed per variant, like nvfp4_dot.h's.
#pragma once

#include <cstdint>

#include "ops/cpu/dot_rows.h"
#include "ops/cpu/kernel_family.h"

namespace nvfp4lm::cpu {

struct DenseRows {
  const float* data;  // [rows, ld], row o at data + o * ld
  int64_t ld;
  int64_t cols;  // any count >= 1
};

using DenseDotFn = void (*)(const DenseRows&, int64_t, int64_t, const float* const*, float* const*);
using DenseDotFamily = KernelFamily<RowKernels<DenseDotFn>>;
const DenseDotFamily& dense_dot_family();  // avx512f, avx2+fma, scalar

// y_rows[r][o] for weight rows o in [first, last) and r < n (1 <= n <= 8); x rows hold `cols` floats, y rows are
// written at index o.
void dense_dot_rows(const DenseDotFamily::Variant& variant, const DenseRows& w, int64_t first, int64_t last,
                    const float* const* x_rows, float* const* y_rows, int n);

}  // namespace nvfp4lm::cpu
