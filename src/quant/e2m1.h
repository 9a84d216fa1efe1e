// FP4 E2M1 scalar codec (1 sign, 2 exponent, 1 mantissa bits; no inf/NaN). Code magnitudes 0..7 map to
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}; bit 3 is the sign. Host and device.
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace nvfp4lm {

NVFP4LM_HD float e2m1_to_float(uint8_t code) {
  // Built from the bits instead of a table lookup (a table indexed at run time lands in local memory on
  // the GPU): magnitude m = 2e + mantissa; m >= 2 is (1 + mantissa/2) * 2^(e-1), m == 1 is 0.5. Bit 3 is
  // the sign (code 8 decodes to -0).
  const uint32_t m = code & 7u;
  uint32_t bits = m < 2 ? (m ? 0x3F000000u : 0u) : ((((m >> 1) + 126u) << 23) | ((m & 1u) << 22));
  bits |= static_cast<uint32_t>(code & 8u) << 28;
  return bits_float(bits);
}

// Round-to-nearest-even onto the E2M1 grid, saturating at +-6. `x` is already divided by the scale.
// Ties go to the code with an even mantissa bit (0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2.0, 2.5 -> 2.0,
// 3.5 -> 4.0, 5 -> 4.0). The magnitude code is the number of rounding boundaries below |x| (strict at a
// boundary whose tie goes down, inclusive where it goes up): branch-free, so loops over it vectorize.
// Zero is always +0 (canonical code 0); NaN gives 0.
NVFP4LM_HD uint8_t float_to_e2m1_rne(float x) {
  const float a = x < 0.0f ? -x : x;
  const int m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  const int sign = (x < 0.0f && m != 0) ? 8 : 0;
  return static_cast<uint8_t>(sign | m);
}

// Stochastic rounding onto the grid: rounds up (in magnitude) with probability (|x| - lo) / (hi - lo),
// where u is uniform in [0, 1). Saturates at 6. Unbiased for |x| <= 6. Zero is +0; NaN gives 0.
NVFP4LM_HD uint8_t float_to_e2m1_stochastic(float x, float u) {
  uint8_t sign = x < 0.0f ? 8 : 0;
  float a = x < 0.0f ? -x : x;
  if (a >= 6.0f) return static_cast<uint8_t>(sign | 7);  // saturation
  if (!(a == a)) return 0;                               // NaN, as in the nearest-even version
  // The grid neighbour below a and the gap to the next one, in closed form (the grid steps are 0.5 below 2,
  // 1 below 4, 2 below 6). a - lo_value and the division by a power of two are exact.
  uint8_t lo;
  float lo_value, step;
  if (a < 2.0f) {
    lo = static_cast<uint8_t>(a * 2.0f);  // 0..3
    lo_value = 0.5f * lo;
    step = 0.5f;
  } else if (a < 4.0f) {
    lo = a < 3.0f ? 4 : 5;
    lo_value = a < 3.0f ? 2.0f : 3.0f;
    step = 1.0f;
  } else {
    lo = 6;
    lo_value = 4.0f;
    step = 2.0f;
  }
  float p_up = (a - lo_value) / step;
  uint8_t m = (u < p_up) ? static_cast<uint8_t>(lo + 1) : lo;
  return static_cast<uint8_t>(m == 0 ? 0 : (sign | m));
}

// Two codes per byte: element 2i in the low nibble, element 2i+1 in the high nibble.
NVFP4LM_HD uint8_t pack_e2m1_pair(uint8_t low_code, uint8_t high_code) {
  return static_cast<uint8_t>((low_code & 0xF) | ((high_code & 0xF) << 4));
}
NVFP4LM_HD uint8_t e2m1_low_code(uint8_t byte) { return static_cast<uint8_t>(byte & 0xF); }
NVFP4LM_HD uint8_t e2m1_high_code(uint8_t byte) { return static_cast<uint8_t>(byte >> 4); }

}  // namespace nvfp4lm
