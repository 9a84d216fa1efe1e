// Block-wise 8-bit quantization of Adam moments (the state of AdamW8bit).
//
// Idea from bitsandbytes' block-wise 8-bit optimizers (Dettmers et al., "8-bit Optimizers via Block-wise
// Quantization", 2021): split each state tensor into blocks, keep one fp32 absmax per block, and store
// value / absmax as an 8-bit code of a *non-linear* map, so small values keep relative precision instead of
// rounding to zero. bitsandbytes uses its "dynamic tree" map; here the maps are small floating-point formats,
// which are just as CUDA-friendly (a table lookup to decode, a binary search to encode) and easy to state:
//
//  - First moment m (signed): int8 code = sign (bit 7) | 7-bit magnitude index. Magnitudes are an unsigned
//    mini-float with 4 exponent and 3 mantissa bits (with subnormals), divided by its largest value so the
//    table runs from 0 to exactly 1. Relative spacing 1/8..1/16, range ~2^-18 (5.4 decades) below absmax.
//  - Second moment v (non-negative): stored as s = sqrt(v), which halves the dynamic range to cover
//    (v spans ~11 decades below its block maximum) and is the quantity the update divides by. uint8 code into
//    a 4-exponent-bit, 4-mantissa-bit mini-float table (relative spacing 1/16..1/32), 0 to exactly 1.
//    A positive s never encodes to 0 (it takes the smallest positive code instead): a zero denominator would
//    turn m / (sqrt(v) + eps) into m / eps.
//
// Blocks are kMomentBlockSize consecutive elements of the flattened tensor (the last one may be short).
//
// Encoding rounds *stochastically* between the two neighbouring codes (probability by distance), so the
// stored moment is unbiased. Nearest rounding is biased in a way that matters: a moment that changes by less
// than half a code step per update (sqrt(v) decays by only 2.5% a step at beta2 = 0.95, the codes are 3-6%
// apart) rounds back to its old code again and again and stops following the gradients. On the least-squares
// test (tests/train/test_adamw8bit.cpp) nearest rounding put the 8-bit run's loss up to 32% off the
// fp32-moment run's and its weights 9% apart; stochastic rounding, 2-7% and ~5% (mostly the noise itself).
// The noise comes from counter_uniform(seed, element index) (core/rng.h): deterministic, independent of
// threading, reproducible by a CUDA twin. The block maximum always encodes exactly.
//
// The per-element encode and decode rules are host/device functions here, so the CPU block functions and the CUDA
// kernel (cuda/optim_kernels.cu, which keeps the tables in shared memory) are one code and write the same codes.
#pragma once

#include <cstdint>

#include "core/numeric.h"  // NVFP4LM_HD, float_bits
#include "train/optim/unfused_math.h"

namespace nvfp4lm {

inline constexpr int64_t kMomentBlockSize = 256;

inline int64_t moment_block_count(int64_t elements) { return (elements + kMomentBlockSize - 1) / kMomentBlockSize; }

// Magnitude tables, ascending, table[0] = 0 and table[size - 1] = 1.
inline constexpr int kSignedMagnitudeCodes = 128;
inline constexpr int kUnsignedCodes = 256;
const float* signed_magnitude_table();  // kSignedMagnitudeCodes entries
const float* unsigned_table();          // kUnsignedCodes entries

// The code for x in [0, 1]: the table entry just below or just above x, the upper one with probability
// (x - below) / (above - below), decided by `uniform` in [0, 1).
NVFP4LM_HD int stochastic_code(const float* table, int size, float x, float uniform) {
  // Branchless binary search for the last entry <= x (table[0] = 0 <= x); size is a power of two.
  int lower = 0;
  for (int step = size / 2; step > 0; step /= 2) lower += table[lower + step] <= x ? step : 0;
  if (lower == size - 1) return lower;  // x == 1: the block maximum
  const float fraction = div_rn(sub_rn(x, table[lower]), sub_rn(table[lower + 1], table[lower]));
  return uniform < fraction ? lower + 1 : lower;
}

// One element of a block whose largest magnitude is `absmax` (the block's maximum of |value|); `table` is
// signed_magnitude_table() / unsigned_table() (or a copy of it), `uniform` the element's rounding noise.
NVFP4LM_HD uint8_t encode_signed_moment(float value, float absmax, const float* table, float uniform) {
  const float magnitude = absmax > 0.0f ? div_rn(abs_bits(value), absmax) : 0.0f;  // <= 1 exactly
  const int code = stochastic_code(table, kSignedMagnitudeCodes, magnitude, uniform);
  const int sign = (float_bits(value) >> 31) != 0 && code != 0 ? 0x80 : 0;
  return static_cast<uint8_t>(sign | code);
}

NVFP4LM_HD float decode_signed_moment(uint8_t code, float absmax, const float* table) {
  const float magnitude = mul_rn(table[code & 0x7f], absmax);
  return (code & 0x80) ? -magnitude : magnitude;
}

// value must be >= 0.
NVFP4LM_HD uint8_t encode_unsigned_moment(float value, float absmax, const float* table, float uniform) {
  const float x = absmax > 0.0f ? div_rn(value, absmax) : 0.0f;
  int code = stochastic_code(table, kUnsignedCodes, x, uniform);
  if (code == 0 && x > 0.0f) code = 1;  // never lose a positive second moment (see the top of this file)
  return static_cast<uint8_t>(code);
}

NVFP4LM_HD float decode_unsigned_moment(uint8_t code, float absmax, const float* table) {
  return mul_rn(table[code], absmax);
}

// One block of n <= kMomentBlockSize values <-> codes + absmax. Element i of the block draws its rounding noise
// from counter_uniform(seed, first_element + i), first_element being the block's offset in the tensor.
void quantize_signed_block(const float* values, int64_t n, int8_t* codes, float* absmax, uint64_t seed,
                           uint64_t first_element);
void dequantize_signed_block(const int8_t* codes, int64_t n, float absmax, float* values);
// values must be >= 0.
void quantize_unsigned_block(const float* values, int64_t n, uint8_t* codes, float* absmax, uint64_t seed,
                             uint64_t first_element);
void dequantize_unsigned_block(const uint8_t* codes, int64_t n, float absmax, float* values);

}  // namespace nvfp4lm
