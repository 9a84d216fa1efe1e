// ops/cpu/nvfp4_dot.h: every SIMD variant this CPU can run (scalar always) against x · deq(w)ᵀ summed in double,
// for 1..8 activation rows, odd block counts (the AVX-512 tail), sub-ranges of weight rows, all 16 codes incl.
// -0, the tensor scale, and extreme block scales. Variants must also agree with each other to fp32 rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/cpu/nvfp4_dot.h"
#include "ops_testing.h"

namespace nvfp4lm::test::test_nvfp4_dot {
namespace {

using Variant = cpu::Nvfp4DotFamily::Variant;

struct Case {
  Nvfp4Tensor w;
  Tensor x;
};

// out x in weight of random bytes (ops_testing.h), normal activations.
Case random_case(int64_t out, int64_t in, int64_t n, uint64_t seed, float tensor_scale) {
  Rng rng(seed);
  Case c;
  c.w = random_nvfp4_bytes(out, in, rng, tensor_scale);
  c.x = random_normal({n, in}, rng);
  return c;
}

// x · deq(w)ᵀ summed in double, and the sum of |x · w| per output (the scale of any fp32 order's rounding error).
struct Expected {
  std::vector<double> value, magnitude;
};

Expected reference(const Case& c) {
  const Tensor dense = dequantize_nvfp4(c.w, DType::F32);
  const int64_t n = c.x.dim(0), in = c.w.cols, out = c.w.rows;
  Expected e{std::vector<double>(static_cast<size_t>(n * out)), std::vector<double>(static_cast<size_t>(n * out))};
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0, magnitude = 0;
      for (int64_t k = 0; k < in; ++k) {
        const double product = static_cast<double>(c.x.data<float>()[r * in + k]) * dense.data<float>()[o * in + k];
        acc += product;
        magnitude += std::abs(product);
      }
      e.value[static_cast<size_t>(r * out + o)] = acc;
      e.magnitude[static_cast<size_t>(r * out + o)] = magnitude;
    }
  return e;
}

std::vector<float> run(const Variant& variant, const Case& c, int64_t first, int64_t last) {
  const int64_t n = c.x.dim(0), out = c.w.rows;
  std::vector<float> y(static_cast<size_t>(n * out), -7.0f);  // rows outside [first, last) must stay -7
  std::vector<const float*> x_rows;
  std::vector<float*> y_rows;
  for (int64_t r = 0; r < n; ++r) {
    x_rows.push_back(c.x.data<float>() + r * c.w.cols);
    y_rows.push_back(y.data() + r * out);
  }
  const cpu::Nvfp4Rows rows{static_cast<const uint8_t*>(c.w.codes.raw()),
                            static_cast<const uint8_t*>(c.w.block_scales.raw()), c.w.cols, c.w.tensor_scale};
  cpu::nvfp4_dot_rows(variant, rows, first, last, x_rows.data(), y_rows.data(), static_cast<int>(n));
  return y;
}

TEST(Nvfp4Dot, EveryVariantMatchesTheDequantizedProduct) {
  const std::vector<const Variant*> variants = cpu::nvfp4_dot_family().runnable();
  ASSERT_TRUE(variants.back()->isa->portable());
  uint64_t seed = 1;
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{37, 48}, {16, 16}, {5, 160}, {64, 2560}}) {
    for (int64_t n = 1; n <= 8; ++n) {
      for (float tensor_scale : {1.0f, 3.1e-4f}) {
        const Case c = random_case(out, in, n, ++seed, tensor_scale);
        const Expected expected = reference(c);
        for (const Variant* variant : variants) {
          const std::vector<float> y = run(*variant, c, 0, out);
          for (size_t i = 0; i < y.size(); ++i) {
            // fp32 sums of `in` products: a few ulps of the sum of magnitudes.
            ASSERT_NEAR(y[i], expected.value[i], 1e-6 * expected.magnitude[i] + 1e-30)
                << variant->name() << " [" << out << ", " << in << "] n=" << n << " output " << i;
          }
        }
      }
    }
  }
}

TEST(Nvfp4Dot, WritesOnlyTheRequestedWeightRowsAndRepeatsBitForBit) {
  const Case c = random_case(29, 80, 3, 77, 0.5f);
  for (const Variant* variant : cpu::nvfp4_dot_family().runnable())
    expect_writes_only_requested_rows([&](int64_t first, int64_t last) { return run(*variant, c, first, last); }, 29, 3,
                                      7, 19, variant->name());
}

TEST(Nvfp4Dot, NegativeZeroCodesAndZeroScalesGiveZero) {
  Case c = random_case(4, 32, 2, 5, 1.0f);
  auto* codes = static_cast<uint8_t*>(c.w.codes.raw());
  for (int64_t i = 0; i < c.w.codes.numel(); ++i) codes[i] = 0x88;  // -0, -0
  for (const Variant* variant : cpu::nvfp4_dot_family().runnable())
    for (float v : run(*variant, c, 0, 4)) EXPECT_EQ(v, 0.0f) << variant->name();
}

TEST(Nvfp4Dot, BadArgumentsAreInternalErrors) {
  const Case c = random_case(4, 32, 1, 5, 1.0f);
  const cpu::Nvfp4Rows rows{static_cast<const uint8_t*>(c.w.codes.raw()),
                            static_cast<const uint8_t*>(c.w.block_scales.raw()), 32, 1.0f};
  const float* x = c.x.data<float>();
  float y[4];
  float* y_row = y;
  EXPECT_THROW(cpu::nvfp4_dot_rows(cpu::nvfp4_dot_family().variant(cpu::kScalarIsa), rows, 0, 4, &x, &y_row, 0), Error);
  EXPECT_THROW(cpu::nvfp4_dot_rows(cpu::nvfp4_dot_family().variant(cpu::kScalarIsa), rows, 0, 4, &x, &y_row, 9), Error);
  cpu::Nvfp4Rows odd = rows;
  odd.cols = 24;
  EXPECT_THROW(cpu::nvfp4_dot_rows(cpu::nvfp4_dot_family().variant(cpu::kScalarIsa), odd, 0, 4, &x, &y_row, 1), Error);
}

}  // namespace
}  // namespace nvfp4lm::test::test_nvfp4_dot
