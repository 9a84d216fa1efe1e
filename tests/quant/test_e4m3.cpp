// FP8 E4M3 ("fn") scalar codec: all 256 bytes decode to the format's values (computed here from the
// definition), every finite byte round-trips, round-to-nearest-even at every midpoint, saturation, NaN, and
// agreement with a brute-force nearest search over random floats of all magnitudes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/rng.h"
#include "quant/e4m3.h"

namespace nvfp4lm::test_e4m3 {
namespace {

// From the definition: sign bit 7, exponent bits 6-3 (bias 7), mantissa bits 2-0; exponent 0 is subnormal
// (m/8 * 2^-6); exponent 15 with mantissa 7 is NaN; there are no infinities.
double e4m3_by_definition(int byte) {
  const int sign = byte >> 7, exponent = (byte >> 3) & 15, mantissa = byte & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

bool is_nan_byte(int byte) { return (byte & 0x7F) == 0x7F; }

// Nearest finite E4M3 value by search over the 127 non-negative finite bytes; ties to the even byte
// (mantissa bit 0). Saturates to 448.
uint8_t nearest_byte(float x) {
  const double a = std::fabs(static_cast<double>(x));
  int best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (int byte = 0; byte <= 0x7E; ++byte) {
    const double distance = std::fabs(a - e4m3_by_definition(byte));
    if (distance < best_distance || (distance == best_distance && (byte & 1) == 0)) {
      best = byte;
      best_distance = distance;
    }
  }
  return static_cast<uint8_t>((std::signbit(x) ? 0x80 : 0) | best);
}

TEST(E4M3, AllBytesDecodeToTheFormatValues) {
  for (int byte = 0; byte < 256; ++byte) {
    const float decoded = e4m3_to_float(static_cast<uint8_t>(byte));
    const double expected = e4m3_by_definition(byte);
    if (is_nan_byte(byte)) {
      EXPECT_TRUE(std::isnan(decoded)) << "byte " << byte;
      continue;
    }
    EXPECT_EQ(static_cast<double>(decoded), expected) << "byte " << byte;
    EXPECT_EQ(std::signbit(decoded), byte >= 0x80) << "byte " << byte;
  }
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), 0.001953125f);  // 2^-9
  EXPECT_EQ(e4m3_to_float(0x08), 0.015625f);     // 2^-6, smallest normal
  EXPECT_EQ(e4m3_to_float(0x07), 0.013671875f);  // largest subnormal, 7/8 * 2^-6
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
}

TEST(E4M3, EveryFiniteByteRoundTrips) {
  for (int byte = 0; byte < 256; ++byte) {
    if (is_nan_byte(byte)) continue;
    EXPECT_EQ(float_to_e4m3_rne(e4m3_to_float(static_cast<uint8_t>(byte))), byte) << "byte " << byte;
  }
}

TEST(E4M3, MidpointsRoundToEvenAndNeighboursToNearest) {
  for (int byte = 0; byte < 0x7E; ++byte) {
    for (int sign : {0, 0x80}) {
      const int low = sign | byte, high = sign | (byte + 1);
      const float a = e4m3_to_float(static_cast<uint8_t>(low)), b = e4m3_to_float(static_cast<uint8_t>(high));
      const float mid = (a + b) / 2.0f;  // exact: both have at most 4 significant bits
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(a) + b) / 2.0);
      const int even = (low & 1) == 0 ? low : high;
      EXPECT_EQ(float_to_e4m3_rne(mid), even) << "midpoint of bytes " << low << " and " << high;
      EXPECT_EQ(float_to_e4m3_rne(std::nextafter(mid, a)), low) << "just below midpoint " << mid;
      EXPECT_EQ(float_to_e4m3_rne(std::nextafter(mid, b)), high) << "just above midpoint " << mid;
    }
  }
}

TEST(E4M3, SaturatesAndMapsNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {448.0f, 449.0f, 464.0f, 465.0f, 479.0f, 480.0f, 1e30f, std::numeric_limits<float>::max(), inf}) {
    EXPECT_EQ(float_to_e4m3_rne(x), 0x7E) << x;
    EXPECT_EQ(float_to_e4m3_rne(-x), 0xFE) << -x;
  }
  EXPECT_EQ(float_to_e4m3_rne(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(float_to_e4m3_rne(-std::numeric_limits<float>::quiet_NaN()), 0x7F);
  // Below half the smallest subnormal: zero (keeping the sign); exactly half ties to even zero.
  EXPECT_EQ(float_to_e4m3_rne(0.0009765625f), 0x00);  // 2^-10
  EXPECT_EQ(float_to_e4m3_rne(std::nextafter(0.0009765625f, 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3_rne(1e-30f), 0x00);
  EXPECT_EQ(float_to_e4m3_rne(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(float_to_e4m3_rne(-1e-30f), 0x80);
  EXPECT_EQ(float_to_e4m3_rne(-0.0f), 0x80);
}

TEST(E4M3, RoundingMatchesNearestSearchAtAllMagnitudes) {
  Rng rng(11);
  for (int i = 0; i < 20000; ++i) {
    // Log-uniform magnitudes from 2^-14 to 2^10 so subnormals, normals and saturation are all covered.
    const float magnitude = std::ldexp(1.0f + rng.uniform(), static_cast<int>(rng.below(25)) - 14);
    const float x = rng.uniform() < 0.5f ? -magnitude : magnitude;
    ASSERT_EQ(float_to_e4m3_rne(x), nearest_byte(x)) << x;
  }
}

TEST(E4M3, DequantScaleIsDecodedByteTimesTensorScale) {
  Rng rng(3);
  for (int byte = 0; byte < 0x7F; ++byte) {
    const float tensor_scale = rng.uniform() * 1e-3f + 1e-6f;
    EXPECT_EQ(nvfp4_dequant_scale(static_cast<uint8_t>(byte), tensor_scale),
              static_cast<float>(e4m3_by_definition(byte)) * tensor_scale);
  }
}

}  // namespace
}  // namespace nvfp4lm::test_e4m3
