// FP4 E2M1 scalar codec (1 sign, 2 exponent, 1 mantissa bits; no inf/NaN). Code magnitudes 0..7 map to
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}; bit 3 is the sign. Host and device.
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace nvfp4lm {

NVFP4LM_HD float e2m1_to_float(uint8_t code) {
  // Index by the low 3 bits; sign from bit 3.
  constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float m = kMagnitude[code & 7];
  return (code & 8) ? -m : m;
}

// Round-to-nearest-even onto the E2M1 grid, saturating at +-6. `x` is already divided by the scale.
// Ties go to the code with an even mantissa bit (e.g. 0.25 -> 0, 0.75 -> 1, 2.5 -> 2, 5 -> 4).
NVFP4LM_HD uint8_t float_to_e2m1_rne(float x) {
  uint8_t sign = (x < 0.0f || (x == 0.0f && (float_bits(x) >> 31))) ? 8 : 0;
  float a = x < 0.0f ? -x : x;
  uint8_t m;
  if (a <= 0.25f)
    m = 0;  // tie 0.25 -> 0 (even)
  else if (a < 0.75f)
    m = 1;  // 0.5
  else if (a <= 1.25f)
    m = 2;  // 1.0 (ties 0.75 -> 1.0 even, 1.25 -> 1.0 even)
  else if (a < 1.75f)
    m = 3;  // 1.5
  else if (a <= 2.5f)
    m = 4;  // 2.0 (tie 1.75 -> 2.0, 2.5 -> 2.0)
  else if (a < 3.5f)
    m = 5;  // 3.0
  else if (a <= 5.0f)
    m = 6;  // 4.0 (tie 3.5 -> 4.0, 5.0 -> 4.0)
  else
    m = 7;                                               // 6.0 and saturation
  return static_cast<uint8_t>(m == 0 ? 0 : (sign | m));  // zero is always +0 (canonical code 0)
}

// Stochastic rounding onto the grid: rounds up (in magnitude) with probability (|x| - lo) / (hi - lo),
// where u is uniform in [0, 1). Saturates at 6. Unbiased for |x| <= 6.
NVFP4LM_HD uint8_t float_to_e2m1_stochastic(float x, float u) {
  constexpr float kGrid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  uint8_t sign = x < 0.0f ? 8 : 0;
  float a = x < 0.0f ? -x : x;
  if (a >= 6.0f) return static_cast<uint8_t>(sign | 7);
  uint8_t lo = 0;
#pragma unroll
  for (uint8_t i = 1; i < 8; ++i)
    if (kGrid[i] <= a) lo = i;
  float step = kGrid[lo + 1] - kGrid[lo];
  float p_up = (a - kGrid[lo]) / step;
  uint8_t m = (u < p_up) ? static_cast<uint8_t>(lo + 1) : lo;
  return static_cast<uint8_t>(m == 0 ? 0 : (sign | m));
}

}  // namespace nvfp4lm
