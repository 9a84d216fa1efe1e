// ops/cpu/int8_weight_dot.h: the weight quantizer against its definition, and every variant this CPU can run (scalar
// always) against the header's formula summed in double and against the fp32 product x · wᵀ within the stated bound;
// 1..8 rows, partial pairs of chunks, sub-ranges of rows, zero and non-finite blocks.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/numeric.h"
#include "ops/cpu/int8_weight_dot.h"
#include "ops_testing.h"

namespace nvfp4lm::test::test_int8_weight_dot {
namespace {

using Variant = cpu::Int8WeightDotFamily::Variant;
using cpu::Int8Activations;
using cpu::Int8Weights;

struct Case {
  int64_t out = 0, in = 0;
  std::vector<uint16_t> w;  // BF16 [out, in]
  Tensor x;
  std::vector<Int8Activations> quantized;
  Int8Weights weights;
};

Case random_case(int64_t out, int64_t in, int64_t n, uint64_t seed) {
  Rng rng(seed);
  Case c;
  c.out = out;
  c.in = in;
  const Tensor w = random_normal({out, in}, rng);
  for (int64_t i = 0; i < out * in; ++i)
    c.w.push_back(float_to_bf16(w.data<float>()[i] * (i % 29 == 0 ? 30.f : 0.02f)));
  for (int64_t i = 0; i < 16 && i < in; ++i) c.w[static_cast<size_t>(i)] = 0;  // row 0, block 0: all zero
  c.x = random_normal({n, in}, rng);
  c.quantized.resize(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r)
    cpu::quantize_int8_activations(c.x.data<float>() + r * in, in, c.quantized[static_cast<size_t>(r)]);
  c.weights = cpu::quantize_int8_weights(c.w.data(), true, out, in, in);
  return c;
}

int u_of(const Int8Weights& w, int64_t o, int64_t k) {
  return w.values[static_cast<size_t>(o * w.padded_cols + cpu::int8_position(k))] - 128;
}
float t_of(const Int8Weights& w, int64_t o, int64_t k) {
  return bf16_to_float(w.scales[static_cast<size_t>(o * (w.padded_cols / 16) + k / 16)]);
}
int q_of(const Int8Activations& a, int64_t k) { return a.q[static_cast<size_t>(cpu::int8_position(k))]; }
float s_of(const Int8Activations& a, int64_t k) { return a.scale[static_cast<size_t>(k / 16)] / 128.0f; }

TEST(Int8WeightDot, QuantizerFollowsItsDefinition) {
  const Case c = random_case(5, 400, 1, 3);
  const Int8Weights& w = c.weights;
  EXPECT_EQ(w.padded_cols, 512);
  EXPECT_EQ(w.bytes(), static_cast<uint64_t>(5 * 512 + 2 * 5 * 32));
  for (int64_t o = 0; o < 5; ++o) {
    for (int64_t b = 0; b < 400 / 16; ++b) {
      float max_abs = 0;
      for (int i = 0; i < 16; ++i)
        max_abs = std::max(max_abs, std::abs(bf16_to_float(c.w[static_cast<size_t>(o * 400 + b * 16 + i)])));
      const float t = t_of(w, o, b * 16);
      EXPECT_GE(t, max_abs / 127.0f);
      EXPECT_LE(t, max_abs / 127.0f * (1 + 1.0f / 128));  // rounded up to a BF16: at most one BF16 ulp above
      for (int i = 0; i < 16; ++i) {
        const int64_t k = b * 16 + i;
        const float value = bf16_to_float(c.w[static_cast<size_t>(o * 400 + k)]);
        const int expected = t == 0 ? 0 : static_cast<int>(std::nearbyint(value / t));
        ASSERT_EQ(u_of(w, o, k), expected) << o << ", " << k;
        EXPECT_LE(std::abs(value - t * u_of(w, o, k)), t / 2 * (1 + 1e-6f));
      }
    }
    for (int64_t k = 400; k < 512; ++k) EXPECT_EQ(u_of(w, o, k), 0);
    for (int64_t b = 400 / 16; b < 32; ++b) EXPECT_EQ(t_of(w, o, b * 16), 0.0f);
  }
  EXPECT_EQ(t_of(w, 0, 0), 0.0f);  // the all-zero block
}

struct Expected {
  std::vector<double> value, magnitude, product, bound;
};

Expected reference(const Case& c) {
  const int64_t n = c.x.dim(0);
  Expected e;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < c.out; ++o) {
      const Int8Activations& a = c.quantized[static_cast<size_t>(r)];
      const float* x = c.x.data<float>() + r * c.in;
      double value = 0, magnitude = 0, product = 0, bound = 0;
      for (int64_t b = 0; b < c.in / 16; ++b) {
        int64_t d = 0, d_abs = 0;
        double max_x = 0;
        for (int i = 0; i < 16; ++i) max_x = std::max(max_x, std::abs(static_cast<double>(x[b * 16 + i])));
        const double t = t_of(c.weights, o, b * 16), s = s_of(a, b * 16);
        for (int i = 0; i < 16; ++i) {
          const int64_t k = b * 16 + i;
          const double wv = bf16_to_float(c.w[static_cast<size_t>(o * c.in + k)]);
          d += u_of(c.weights, o, k) * q_of(a, k);
          d_abs += std::abs(u_of(c.weights, o, k) * q_of(a, k));
          product += wv * x[k];
          bound += std::abs(x[k]) * t / 2 + std::abs(wv) * max_x / 254 + t * max_x / 508;
        }
        value += t * s * static_cast<double>(d);
        magnitude += t * s * static_cast<double>(d_abs);
      }
      e.value.push_back(value);
      e.magnitude.push_back(magnitude);
      e.product.push_back(product);
      e.bound.push_back(bound);
    }
  return e;
}

std::vector<float> run(const Variant& variant, const Case& c, int64_t first, int64_t last) {
  const int64_t n = c.x.dim(0);
  std::vector<float> y(static_cast<size_t>(n * c.out), -7.0f);
  std::vector<const Int8Activations*> x_rows;
  std::vector<float*> y_rows;
  for (int64_t r = 0; r < n; ++r) {
    x_rows.push_back(&c.quantized[static_cast<size_t>(r)]);
    y_rows.push_back(y.data() + r * c.out);
  }
  cpu::int8_weight_dot_rows(variant, c.weights, first, last, x_rows.data(), y_rows.data(), static_cast<int>(n));
  return y;
}

TEST(Int8WeightDot, EveryVariantComputesTheFormulaWithinTheBoundOfTheFp32Product) {
  uint64_t seed = 40;
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{7, 16}, {9, 400}, {5, 384}, {3, 272}, {33, 2560}}) {
    for (int64_t n : {1, 2, 5, 8}) {
      const Case c = random_case(out, in, n, ++seed);
      const Expected expected = reference(c);
      for (const Variant* variant : cpu::int8_weight_dot_family().runnable()) {
        const std::vector<float> y = run(*variant, c, 0, out);
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_NEAR(y[i], expected.value[i], 1e-6 * expected.magnitude[i] + 1e-30)
              << variant->name() << " [" << out << ", " << in << "] n=" << n << " output " << i;
          ASSERT_NEAR(y[i], expected.product[i], expected.bound[i] * 1.001 + 1e-6 * expected.magnitude[i])
              << variant->name() << " [" << out << ", " << in << "] n=" << n << " output " << i;
        }
      }
    }
  }
}

// The AArch64 variants sum as the portable one does (ops/cpu/arm/int8_weight_dot.cpp): equal bit for bit.
TEST(Int8WeightDot, TheAArch64VariantsEqualThePortableOneBitForBit) {
  const Variant& portable = cpu::int8_weight_dot_family().variant(cpu::kScalarIsa);
  int compared = 0;
  uint64_t seed = 90;
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{7, 16}, {9, 400}, {5, 384}, {33, 2560}})
    for (int64_t n = 1; n <= 8; ++n) {
      const Case c = random_case(out, in, n, ++seed);
      const std::vector<float> expected = run(portable, c, 0, out);
      for (const Variant* variant : cpu::int8_weight_dot_family().runnable()) {
        if (!sums_in_the_portable_order(*variant->isa)) continue;
        expect_same_bits(run(*variant, c, 0, out), expected, variant->name(), fmt::format("[{}, {}] n={}", out, in, n));
        ++compared;
      }
    }
  if (compared == 0) GTEST_SKIP() << "no AArch64 variant runs on this CPU";
}

TEST(Int8WeightDot, WritesOnlyTheRequestedRowsAndRepeatsBitForBit) {
  const Case c = random_case(29, 400, 3, 77);
  for (const Variant* variant : cpu::int8_weight_dot_family().runnable())
    expect_writes_only_requested_rows([&](int64_t first, int64_t last) { return run(*variant, c, first, last); }, 29, 3,
                                      7, 19, variant->name());
}

TEST(Int8WeightDot, NonFiniteWeightsGiveNonFiniteOutputs) {
  Case c = random_case(3, 256, 1, 5);
  c.w[300] = 0x7F80;  // +inf in row 1
  c.weights = cpu::quantize_int8_weights(c.w.data(), true, 3, 256, 256);
  for (const Variant* variant : cpu::int8_weight_dot_family().runnable()) {
    const std::vector<float> y = run(*variant, c, 0, 3);
    EXPECT_TRUE(std::isfinite(y[0]) && std::isfinite(y[2])) << variant->name();
    EXPECT_FALSE(std::isfinite(y[1])) << variant->name();
  }
}

TEST(Int8WeightDot, F32AndBf16TablesOfTheSameValuesQuantizeAlike) {
  const Case c = random_case(6, 272, 1, 9);
  std::vector<float> f32;
  for (uint16_t bits : c.w) f32.push_back(bf16_to_float(bits));
  const Int8Weights from_f32 = cpu::quantize_int8_weights(f32.data(), false, 6, 272, 272);
  EXPECT_EQ(from_f32.values, c.weights.values);
  EXPECT_EQ(from_f32.scales, c.weights.scales);
}

TEST(Int8WeightDot, BadArgumentsAreInternalErrors) {
  const Case c = random_case(4, 32, 1, 5);
  const Int8Activations* x = &c.quantized[0];
  float y[4];
  float* y_row = y;
  EXPECT_THROW(
      cpu::int8_weight_dot_rows(cpu::int8_weight_dot_family().variant(cpu::kScalarIsa), c.weights, 0, 4, &x, &y_row, 0),
      Error);
  EXPECT_THROW(
      cpu::int8_weight_dot_rows(cpu::int8_weight_dot_family().variant(cpu::kScalarIsa), c.weights, 0, 5, &x, &y_row, 1),
      Error);
  Int8Activations other;
  const std::vector<float> wide(48, 1.0f);
  cpu::quantize_int8_activations(wide.data(), 48, other);
  const Int8Activations* other_row = &other;
  EXPECT_THROW(cpu::int8_weight_dot_rows(cpu::int8_weight_dot_family().variant(cpu::kScalarIsa), c.weights, 0, 4,
                                         &other_row, &y_row, 1),
               Error);
  EXPECT_THROW(cpu::quantize_int8_weights(c.w.data(), true, 4, 24, 32), Error);
}

}  // namespace
}  // namespace nvfp4lm::test::test_int8_weight_dot
