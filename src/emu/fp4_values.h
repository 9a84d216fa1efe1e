// The values of the FP4 formats the emulated device's block-scaled instructions and its cuBLASLt read, written from
// their definitions (PTX ISA "Alternate floating point data formats"; cuBLAS §3.1.4): exact in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace nvfp4lm::emu {

// E2M1: sign bit 3, magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
inline double e2m1_code_value(uint32_t code) {
  static constexpr double kValues[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (code & 0x8 ? -1.0 : 1.0) * kValues[code & 0x7];
}

// UE4M3: E4M3 without the sign bit (callers decide what a set MSB means); 0x7F is NaN.
inline double ue4m3_value(uint8_t byte) {
  if (byte == 0x7F) return std::numeric_limits<double>::quiet_NaN();
  const int exponent = byte >> 3, mantissa = byte & 0x7;
  return exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
}

}  // namespace nvfp4lm::emu
