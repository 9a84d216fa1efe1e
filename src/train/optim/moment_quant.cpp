#include "train/optim/moment_quant.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"
#include "core/rng.h"

namespace nvfp4lm {
namespace {

// Unsigned mini-float with 4 exponent bits and `mantissa_bits` mantissa bits (subnormals at exponent 0),
// normalized by its largest value. Computed in double, rounded once to float.
template <int kSize>
std::array<float, kSize> make_minifloat_table(int mantissa_bits) {
  const int mantissa_codes = 1 << mantissa_bits;
  auto unnormalized = [&](int code) {
    const int exponent = code / mantissa_codes;
    const int mantissa = code % mantissa_codes;
    const double fraction = static_cast<double>(mantissa) / mantissa_codes;
    if (exponent == 0) return std::ldexp(fraction, 1);  // subnormal: 0.f * 2^1 continues 1.f * 2^1 below
    return std::ldexp(1.0 + fraction, exponent);
  };
  const double largest = unnormalized(kSize - 1);
  std::array<float, kSize> table{};
  for (int code = 0; code < kSize; ++code) table[code] = static_cast<float>(unnormalized(code) / largest);
  table[kSize - 1] = 1.0f;
  return table;
}

const std::array<float, kSignedMagnitudeCodes> kSignedTable = make_minifloat_table<kSignedMagnitudeCodes>(3);
const std::array<float, kUnsignedCodes> kUnsignedTable = make_minifloat_table<kUnsignedCodes>(4);

float block_absmax(const float* values, int64_t n) {
  float absmax = 0.0f;
  for (int64_t i = 0; i < n; ++i) absmax = std::max(absmax, std::fabs(values[i]));
  return absmax;
}

}  // namespace

const float* signed_magnitude_table() { return kSignedTable.data(); }
const float* unsigned_table() { return kUnsignedTable.data(); }

void quantize_signed_block(const float* values, int64_t n, int8_t* codes, float* absmax, uint64_t seed,
                           uint64_t first_element) {
  NVFP4LM_ASSERT(n > 0 && n <= kMomentBlockSize, "block of {} elements", n);
  const float scale = block_absmax(values, n);
  *absmax = scale;
  for (int64_t i = 0; i < n; ++i) {
    const float uniform = counter_uniform(seed, first_element + static_cast<uint64_t>(i));
    codes[i] = static_cast<int8_t>(encode_signed_moment(values[i], scale, kSignedTable.data(), uniform));
  }
}

void dequantize_signed_block(const int8_t* codes, int64_t n, float absmax, float* values) {
  for (int64_t i = 0; i < n; ++i)
    values[i] = decode_signed_moment(static_cast<uint8_t>(codes[i]), absmax, kSignedTable.data());
}

void quantize_unsigned_block(const float* values, int64_t n, uint8_t* codes, float* absmax, uint64_t seed,
                             uint64_t first_element) {
  NVFP4LM_ASSERT(n > 0 && n <= kMomentBlockSize, "block of {} elements", n);
  const float scale = block_absmax(values, n);
  *absmax = scale;
  for (int64_t i = 0; i < n; ++i) {
    const float uniform = counter_uniform(seed, first_element + static_cast<uint64_t>(i));
    codes[i] = encode_unsigned_moment(values[i], scale, kUnsignedTable.data(), uniform);
  }
}

void dequantize_unsigned_block(const uint8_t* codes, int64_t n, float absmax, float* values) {
  for (int64_t i = 0; i < n; ++i) values[i] = decode_unsigned_moment(codes[i], absmax, kUnsignedTable.data());
}

}  // namespace nvfp4lm
