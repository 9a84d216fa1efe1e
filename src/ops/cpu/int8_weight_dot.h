// A BF16 (or F32) weight held as int8 for the CPU decode step's lm_head under CpuMatmul::Int8Activations
// (ops/cpu_matmul.h): the tied BF16 embedding is the largest single read of a 4B model's token (0.78 of 2.8 GB); as
// int8 with a scale per 16 values it is 0.44 GB, read by integer dot products with the step's int8 activations
// (ops/cpu/nvfp4_int8_dot.h). Like llama.cpp's Q8_0 (a Q6_K output layer is what its Q4_0 models read).
//
// Numerics. Per row and block b of 16 values: t_b = max|w| / 127 rounded up to a BF16 (so |w| / t_b <= 127), w_i ≈
// t_b · u_i with u_i = round_half_even(w_i / t_b) in [-127, 127], |w_i - t_b u_i| <= t_b / 2. With the activations'
// s_b and q_i, exactly in integers D_b = Σ_{i in b} u_i q_i, and y = Σ_b t_b · s_b · D_b in fp32 (order fixed per
// variant). Against x · wᵀ: |y - y_ref| <= Σ_b Σ_{i in b} (|x_i| t_b / 2 + |w_i| max_b|x| / 254 + t_b max_b|x| / 508)
// plus fp32 sums, the bound the tests check. The values are stored as u_i + 128 (vpdpbusd's unsigned operand; the
// activations carry the -128·Σq correction) in the activations' reordered chunk layout.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/cpu/dot_rows.h"
#include "ops/cpu/kernel_family.h"
#include "ops/cpu/nvfp4_int8_dot.h"

namespace nvfp4lm::cpu {

inline constexpr int kInt8BlocksPerPair = 16;               // blocks per pair of chunks
inline constexpr float kInt8WeightUnscale = 1.0f / 128.0f;  // undoes the activations' 128·s_b

struct Int8Weights {
  int64_t rows = 0, cols = 0, padded_cols = 0;  // padded_cols: cols rounded up to kInt8Padding
  std::vector<uint8_t> values;                  // [rows, padded_cols]: u + 128, each chunk reordered, 128 past cols
  std::vector<uint16_t> scales;                 // [rows, padded_cols / 16]: t_b as BF16 bits, 0 past cols
  uint64_t bytes() const { return values.size() + 2 * scales.size(); }
};

// Quantizes a BF16 or F32 matrix [rows, cols] (`bf16` says which; row stride ld elements, cols a multiple of 16),
// rows in parallel.
Int8Weights quantize_int8_weights(const void* data, bool bf16, int64_t rows, int64_t cols, int64_t ld);

using Int8WeightDotFn = void (*)(const Int8Weights&, int64_t, int64_t, const Int8Activations* const*, float* const*);
using Int8WeightDotFamily = KernelFamily<RowKernels<Int8WeightDotFn>>;
const Int8WeightDotFamily& int8_weight_dot_family();  // avx512vnni+vbmi, avx2+fma, neon+dotprod, neon, scalar

// y_rows[r][o] = the formula above for weight rows o in [first, last) and the r-th quantized activation row
// (r < n <= 8, cols equal to w.cols).
void int8_weight_dot_rows(const Int8WeightDotFamily::Variant& variant, const Int8Weights& w, int64_t first,
                          int64_t last, const Int8Activations* const* x_rows, float* const* y_rows, int n);

}  // namespace nvfp4lm::cpu
