// FP8 E4M3 "fn" scalar codec (OCP FP8, the torch.float8_e4m3fn / __nv_fp8_e4m3 format): 1 sign, 4 exponent
// (bias 7), 3 mantissa bits; no infinities; 0x7F and 0xFF are NaN; max finite 448 (0x7E); subnormals are
// m/8 * 2^-6. Host and device, bit-exact on both, so CPU and CUDA quantizers produce the same bytes.
//
// nvfp4_dequant_scale() is THE definition of an NVFP4 block's multiplier: every dequantization (CPU, CUDA,
// tests, exporters) computes value = e2m1_to_float(code) * nvfp4_dequant_scale(scale_byte, tensor_scale), in
// that order, in fp32, so all of them agree bit for bit (and the quantizer divides by the same number).
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace nvfp4lm {

inline constexpr uint8_t kE4M3NaN = 0x7F;
inline constexpr uint8_t kE4M3MaxByte = 0x7E;  // 448

NVFP4LM_HD float e4m3_to_float(uint8_t byte) {
  const uint32_t sign = static_cast<uint32_t>(byte & 0x80u) << 24;
  const uint32_t exponent = (byte >> 3) & 0xFu;
  const uint32_t mantissa = byte & 0x7u;
  if (exponent == 0xFu && mantissa == 0x7u) return bits_float(sign | 0x7FC00000u);  // NaN
  if (exponent == 0) {
    // Subnormal (and zero): mantissa * 2^-9, exact in fp32.
    const float magnitude = static_cast<float>(mantissa) * 0.001953125f;
    return sign ? -magnitude : magnitude;
  }
  // Normal: rebias the exponent from 7 to 127 and widen the mantissa from 3 to 23 bits.
  return bits_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

// Round to nearest, ties to even, saturating: |x| >= 448 (and +-inf) give +-448, like the hardware's
// cvt.rn.satfinite; NaN gives 0x7F. The sign of zero is kept (-0 -> 0x80).
NVFP4LM_HD uint8_t float_to_e4m3_rne(float x) {
  const uint32_t bits = float_bits(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return kE4M3NaN;
  if (abs_bits >= 0x43E00000u) return static_cast<uint8_t>(sign | kE4M3MaxByte);  // >= 448
  if (abs_bits < 0x3C800000u) {
    // Below 2^-6 the grid is uniform with step 2^-9: round |x| * 2^9 (exact, a power of two) to an integer.
    // The result 0..8 is also the byte, because 8 units (2^-6) is exactly the smallest normal, 0x08.
    const float units = bits_float(abs_bits) * 512.0f;
    uint32_t whole = static_cast<uint32_t>(units);
    const float remainder = units - static_cast<float>(whole);
    if (remainder > 0.5f || (remainder == 0.5f && (whole & 1u))) ++whole;
    return static_cast<uint8_t>(sign | whole);
  }
  // Normal: exponent 2^-6..2^8 becomes 1..15; keep 3 of the 23 mantissa bits, round on the other 20. A carry
  // out of the mantissa correctly bumps the exponent; the largest result is 0x7E since |x| < 448.
  const uint32_t exponent = (abs_bits >> 23) - 120u;
  const uint32_t mantissa = abs_bits & 0x7FFFFFu;
  uint32_t byte = (exponent << 3) | (mantissa >> 20);
  const uint32_t rest = mantissa & 0xFFFFFu;
  if (rest > 0x80000u || (rest == 0x80000u && (byte & 1u))) ++byte;
  return static_cast<uint8_t>(sign | byte);
}

// The fp32 multiplier of one NVFP4 block: decoded scale byte times the tensor scale.
NVFP4LM_HD float nvfp4_dequant_scale(uint8_t scale_byte, float tensor_scale) {
  return e4m3_to_float(scale_byte) * tensor_scale;
}

}  // namespace nvfp4lm
