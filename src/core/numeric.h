// Scalar conversions between fp32 and the 16-bit float formats, usable on host and device.
// Rounding is round-to-nearest-even everywhere; NaN stays NaN. These are the bit-exact definitions the
// CPU reference uses; CUDA kernels may use the hardware intrinsics, which agree.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define NVFP4LM_HD __host__ __device__ __forceinline__
#else
#define NVFP4LM_HD inline
#endif

namespace nvfp4lm {

NVFP4LM_HD uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
#endif
}

NVFP4LM_HD float bits_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
#endif
}

NVFP4LM_HD float bf16_to_float(uint16_t bits) { return bits_float(static_cast<uint32_t>(bits) << 16); }

NVFP4LM_HD uint16_t float_to_bf16(float value) {
  uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

NVFP4LM_HD float f16_to_float(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // inf / NaN
  if (exponent == 0) {
    if (mantissa == 0) return bits_float(sign);
    // subnormal: mantissa * 2^-24
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

NVFP4LM_HD uint16_t float_to_f16(float value) {
  uint32_t bits = float_bits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs_bits >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs_bits < 0x38800000u) {
    // Result is subnormal or zero: scale to units of 2^-24 and round to nearest even.
    float magnitude = bits_float(abs_bits);
    float scaled = magnitude * 16777216.0f;  // exact (power of two)
    uint32_t units = static_cast<uint32_t>(scaled);
    float remainder = scaled - static_cast<float>(units);
    if (remainder > 0.5f || (remainder == 0.5f && (units & 1u))) ++units;
    return static_cast<uint16_t>(sign | units);
  }
  uint32_t exponent = (abs_bits >> 23) - 112u;
  uint32_t mantissa = abs_bits & 0x7fffffu;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: fine
  return static_cast<uint16_t>(sign | half);
}

}  // namespace nvfp4lm
