// E2M1 (FP4) scalar codec: decoding of all 16 codes from the format definition, round-to-nearest-even
// (ties, saturation, against a brute-force nearest search), stochastic rounding of one value, nibble packing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "core/rng.h"
#include "quant/e2m1.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::test_e2m1 {
namespace {

// Value of a code from the definition: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0; exponent 0 is
// subnormal (mantissa * 0.5).
float e2m1_by_definition(int code) {
  const int sign = (code >> 3) & 1, exponent = (code >> 1) & 3, mantissa = code & 1;
  const double magnitude = exponent == 0 ? mantissa * 0.5 : std::ldexp(1.0 + mantissa / 2.0, exponent - 1);
  return static_cast<float>(sign ? -magnitude : magnitude);
}

// Nearest grid value by search; ties go to the code with mantissa bit 0. Saturates at +-6.
uint8_t nearest_code(float x) {
  int best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (int code = 0; code < 8; ++code) {
    const double distance = std::fabs(std::fabs(static_cast<double>(x)) - e2m1_by_definition(code));
    if (distance < best_distance || (distance == best_distance && (code & 1) == 0)) {
      best = code;
      best_distance = distance;
    }
  }
  return static_cast<uint8_t>(best == 0 ? 0 : ((x < 0 ? 8 : 0) | best));
}

TEST(E2M1, AllSixteenCodesDecodeToTheFormatValues) {
  for (int code = 0; code < 16; ++code) {
    const float expected = e2m1_by_definition(code);
    EXPECT_EQ(e2m1_to_float(static_cast<uint8_t>(code)), expected) << "code " << code;
    EXPECT_EQ(std::signbit(e2m1_to_float(static_cast<uint8_t>(code))), code >= 8) << "code " << code;
  }
  EXPECT_EQ(e2m1_to_float(7), 6.0f);
  EXPECT_EQ(e2m1_to_float(1), 0.5f);
  EXPECT_EQ(e2m1_to_float(13), -3.0f);
}

TEST(E2M1, EveryCodeRoundTripsAndZeroIsCanonical) {
  for (int code = 0; code < 16; ++code) {
    const uint8_t expected = code == 8 ? 0 : static_cast<uint8_t>(code);  // -0 encodes as +0
    EXPECT_EQ(float_to_e2m1_rne(e2m1_to_float(static_cast<uint8_t>(code))), expected) << "code " << code;
  }
  EXPECT_EQ(float_to_e2m1_rne(-0.0f), 0);
  EXPECT_EQ(float_to_e2m1_rne(-0.1f), 0);
}

TEST(E2M1, TiesRoundToEvenMantissa) {
  // Midpoints between neighbours and the code they must give: the neighbour whose mantissa bit is 0.
  const struct {
    float x;
    uint8_t code;
  } ties[] = {{0.25f, 0}, {0.75f, 2}, {1.25f, 2}, {1.75f, 4}, {2.5f, 4}, {3.5f, 6}, {5.0f, 6}};
  for (const auto& tie : ties) {
    EXPECT_EQ(float_to_e2m1_rne(tie.x), tie.code) << tie.x;
    EXPECT_EQ(float_to_e2m1_rne(-tie.x), tie.code == 0 ? 0 : (tie.code | 8)) << -tie.x;
    EXPECT_EQ(tie.code & 1, 0);
    // Just off the tie the nearest neighbour wins.
    EXPECT_EQ(float_to_e2m1_rne(std::nextafter(tie.x, 0.0f)), nearest_code(std::nextafter(tie.x, 0.0f)));
    EXPECT_EQ(float_to_e2m1_rne(std::nextafter(tie.x, 10.0f)), nearest_code(std::nextafter(tie.x, 10.0f)));
    EXPECT_NE(float_to_e2m1_rne(std::nextafter(tie.x, 0.0f)), float_to_e2m1_rne(std::nextafter(tie.x, 10.0f)));
  }
}

TEST(E2M1, RoundingMatchesNearestSearchAndSaturates) {
  Rng rng(7);
  for (int i = 0; i < 20000; ++i) {
    const float x = (rng.uniform() * 2.0f - 1.0f) * 8.0f;
    ASSERT_EQ(float_to_e2m1_rne(x), nearest_code(x)) << x;
  }
  EXPECT_EQ(float_to_e2m1_rne(6.5f), 7);
  EXPECT_EQ(float_to_e2m1_rne(1e30f), 7);
  EXPECT_EQ(float_to_e2m1_rne(-std::numeric_limits<float>::infinity()), 15);
}

TEST(E2M1, StochasticPicksANeighbourWithTheRightProbability) {
  // With u on a fine uniform grid, the fraction rounded up must be (|x| - lo) / (hi - lo).
  const float xs[] = {0.1f, 0.3f, 0.6f, 1.2f, 1.9f, 2.25f, 3.7f, 4.5f, 5.9f, -0.3f, -2.75f, -5.0f};
  constexpr int kSteps = 4096;
  for (float x : xs) {
    // Neighbours by search.
    float lo = 0, hi = 6;
    for (int c = 0; c < 8; ++c) {
      const float v = e2m1_by_definition(c);
      if (v <= std::fabs(x)) lo = v;
      if (v >= std::fabs(x) && v < hi) hi = v;
    }
    int ups = 0;
    for (int k = 0; k < kSteps; ++k) {
      const float u = (k + 0.5f) / kSteps;
      const float value = std::fabs(e2m1_to_float(float_to_e2m1_stochastic(x, u)));
      ASSERT_TRUE(value == lo || value == hi) << x << " gave " << value;
      ups += value == hi && hi != lo;
    }
    const double expected = (std::fabs(x) - lo) / (hi - lo);
    EXPECT_NEAR(static_cast<double>(ups) / kSteps, expected, 1.0 / kSteps + 1e-6) << x;
  }
  // Grid values are exact for every u; beyond 6 saturates.
  for (int code = 0; code < 16; ++code)
    for (float u : {0.0f, 0.5f, 0.999f})
      EXPECT_EQ(e2m1_to_float(float_to_e2m1_stochastic(e2m1_to_float(static_cast<uint8_t>(code)), u)),
                e2m1_to_float(static_cast<uint8_t>(code)));
  EXPECT_EQ(float_to_e2m1_stochastic(7.0f, 0.0f), 7);
  EXPECT_EQ(float_to_e2m1_stochastic(-7.0f, 0.9f), 15);
}

TEST(E2M1, PackingPutsElementTwoIInTheLowNibble) {
  EXPECT_EQ(pack_e2m1_pair(0x3, 0xA), 0xA3);
  EXPECT_EQ(e2m1_low_code(0xA3), 0x3);
  EXPECT_EQ(e2m1_high_code(0xA3), 0xA);
  Tensor codes = Tensor::empty({2, 4}, DType::U8);
  const uint8_t values[8] = {1, 2, 3, 4, 15, 14, 0, 7};
  std::copy(values, values + 8, codes.data<uint8_t>());
  Tensor packed = pack_e2m1_codes(codes);
  EXPECT_EQ(packed.dtype(), DType::E2M1x2);
  EXPECT_EQ(packed.shape(), Shape({2, 2}));
  const uint8_t* p = static_cast<const uint8_t*>(packed.raw());
  EXPECT_EQ(p[0], 0x21);
  EXPECT_EQ(p[1], 0x43);
  EXPECT_EQ(p[2], 0xEF);
  EXPECT_EQ(p[3], 0x70);
  Tensor back = unpack_e2m1_codes(packed);
  EXPECT_EQ(std::vector<uint8_t>(back.data<uint8_t>(), back.data<uint8_t>() + 8),
            std::vector<uint8_t>(values, values + 8));
  codes.data<uint8_t>()[3] = 16;
  EXPECT_THROW(pack_e2m1_codes(codes), Error);
}

}  // namespace
}  // namespace nvfp4lm::test_e2m1
