// Small vectorisable math for the CPU kernels (inline, no target attributes of its own, so it compiles into
// each x86-64 level variant at that level's vector width, ops/cpu/x86/levels.h).
//  - exp_vectorizable: expf as a Cephes-style range reduction + degree-6 polynomial, written with plain
//    arithmetic so `#pragma omp simd` loops vectorise it (glibc's expf is a scalar call). Relative error
//    of a few ulp on [-87.3, 88.7]; exactly 0 below (so exp(-inf) = 0 for masked scores), inf above, NaN
//    for NaN. PyTorch's CPU kernels likewise use a vectorised approximation (Sleef).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace nvfp4lm::cpu {

inline float exp_vectorizable(float x) {
  constexpr float kMaxInput = 88.7228393554688f;   // ~ln(FLT_MAX): above, exp overflows to inf
  constexpr float kMinInput = -87.3365447504020f;  // exp(x) < FLT_MIN below: flushed to 0
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 split so n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  const bool underflow = x < kMinInput;
  const bool overflow = x > kMaxInput;
  const bool is_nan = x != x;
  // Ternaries, not fmin/fmax: those must honour NaN rules and stay library calls that block vectorisation.
  // NaN becomes 0 here (its result is replaced below): converting a NaN to int further down is undefined.
  const float clamped = is_nan ? 0.0f : (underflow ? kMinInput : (overflow ? kMaxInput : x));
  // n = round(x log2 e) with the 1.5 * 2^23 trick (vectorises everywhere; std::floor/rint may not).
  constexpr float kRoundShift = 12582912.0f;
  const float n = (clamped * kLog2e + kRoundShift) - kRoundShift;
  const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln2 / 2
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2^n by building the exponent bits; n is in [-126, 128] here, 2^128 handled by splitting.
  const int32_t e = static_cast<int32_t>(n);
  const float half_scale = std::bit_cast<float>((e / 2 + 127) << 23);
  const float rest_scale = std::bit_cast<float>((e - e / 2 + 127) << 23);
  const float result = y * half_scale * rest_scale;
  return is_nan ? x : (underflow ? 0.f : (overflow ? std::numeric_limits<float>::infinity() : result));
}

}  // namespace nvfp4lm::cpu
