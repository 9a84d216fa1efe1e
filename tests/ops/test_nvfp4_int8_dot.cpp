// ops/cpu/nvfp4_int8_dot.h: the activation quantizer against its definition; every variant this CPU can run (scalar
// always) against the exact formula of the header, summed in double (so the variants agree with each other to fp32
// rounding), and against the fp32 product x · deq(w)ᵀ within the stated bound of the activations' rounding; for 1..8
// rows, partial last chunks (odd block counts, fewer than 128 columns), sub-ranges of weight rows, every code
// including -0, negative and subnormal block scales, and non-finite activations.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ops/cpu/nvfp4_int8_dot.h"
#include "ops_testing.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::test::test_nvfp4_int8_dot {
namespace {

using Variant = cpu::Int8DotFamily::Variant;
using cpu::Int8Activations;

struct Case {
  Nvfp4Tensor w;
  Tensor x;
  std::vector<Int8Activations> quantized;
};

// Random code and scale bytes (ops_testing.h), normal activations with a few large outliers per row so that blocks
// have very different ranges.
Case random_case(int64_t out, int64_t in, int64_t n, uint64_t seed, float tensor_scale) {
  Rng rng(seed);
  Case c;
  c.w = random_nvfp4_bytes(out, in, rng, tensor_scale);
  c.x = random_normal({n, in}, rng);
  float* x = c.x.data<float>();
  for (int64_t i = 0; i < n * in; i += 37) x[i] *= 40.0f;
  c.quantized.resize(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) cpu::quantize_int8_activations(x + r * in, in, c.quantized[static_cast<size_t>(r)]);
  return c;
}

// The quantized value and scale of element k, from the quantizer's output.
int q_of(const Int8Activations& a, int64_t k) { return a.q[static_cast<size_t>(cpu::int8_position(k))]; }
float s_of(const Int8Activations& a, int64_t k) { return a.scale[static_cast<size_t>(k / 16)] / 128.0f; }

TEST(Nvfp4Int8Dot, QuantizerFollowsItsDefinition) {
  Rng rng(3);
  for (int64_t cols : {16, 48, 128, 144, 2560}) {
    Tensor x = random_normal({cols}, rng);
    float* v = x.data<float>();
    v[0] = 0.0f;
    if (cols > 32)
      for (int i = 16; i < 32; ++i) v[i] = 0.0f;  // an all-zero block: scale 0, q 0
    Int8Activations a;
    cpu::quantize_int8_activations(v, cols, a);
    EXPECT_EQ(a.cols, cols);
    const int64_t chunks = (cols + 255) / 256 * 2;  // padded to pairs of chunks
    ASSERT_EQ(a.q.size(), static_cast<size_t>(chunks * 128));
    ASSERT_EQ(a.scale.size(), static_cast<size_t>(chunks * 8));
    for (int64_t b = 0; b < cols / 16; ++b) {
      float max_abs = 0;
      for (int i = 0; i < 16; ++i) max_abs = std::max(max_abs, std::abs(v[b * 16 + i]));
      EXPECT_EQ(s_of(a, b * 16), max_abs / 127.0f) << "block " << b;
      for (int i = 0; i < 16; ++i) {
        const int64_t k = b * 16 + i;
        const int expected = max_abs == 0 ? 0 : static_cast<int>(std::nearbyint(v[k] * (127.0f / max_abs)));
        ASSERT_EQ(q_of(a, k), expected) << "element " << k;
        EXPECT_LE(std::abs(v[k] - s_of(a, k) * q_of(a, k)), max_abs / 254.0f * (1 + 1e-5f));
      }
    }
    // Padding past cols is zero; each lane's bias is -12 x the sum of its 8 activations.
    for (int64_t k = cols; k < chunks * 128; ++k) EXPECT_EQ(q_of(a, k), 0);
    for (int64_t b = cols / 16; b < chunks * 8; ++b) EXPECT_EQ(a.scale[static_cast<size_t>(b)], 0.0f);
    for (int64_t lane = 0; lane < chunks * 16; ++lane) {
      const int64_t chunk = lane / 16, l = lane % 16;
      int sum = 0;
      for (int e = 0; e < 8; ++e) sum += q_of(a, chunk * 128 + 8 * l + e);
      EXPECT_EQ(a.bias[static_cast<size_t>(lane)], -12 * sum) << "lane " << lane;
    }
  }
}

// The header's formula in double: tensor_scale / 2 · Σ_b e4m3_b · s_b · D_b (D_b exact); with the magnitude of its
// terms (the scale of fp32 rounding) and the bound against the fp32 product x · deq(w)ᵀ.
struct Expected {
  std::vector<double> value, magnitude, fp32_product, bound;
};

Expected reference(const Case& c) {
  const Tensor dense = dequantize_nvfp4(c.w, DType::F32);
  const int64_t n = c.x.dim(0), in = c.w.cols, out = c.w.rows, blocks = in / 16;
  const auto* codes = static_cast<const uint8_t*>(c.w.codes.raw());
  const auto* scales = static_cast<const uint8_t*>(c.w.block_scales.raw());
  Expected e;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      const Int8Activations& a = c.quantized[static_cast<size_t>(r)];
      double value = 0, magnitude = 0, product = 0, bound = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        int64_t d = 0, d_abs = 0;  // d_abs: Σ |2·e2m1·q|, bounding every partial sum of the block's lanes
        double weight_abs = 0, max_abs = 0;
        for (int i = 0; i < 16; ++i) {
          const int64_t k = b * 16 + i;
          const uint8_t byte = codes[o * in / 2 + k / 2];
          const float code_value = e2m1_to_float(k % 2 ? byte >> 4 : byte & 0xF);
          d += std::lround(2 * code_value) * q_of(a, k);
          d_abs += std::abs(std::lround(2 * code_value) * q_of(a, k));
          weight_abs += std::abs(code_value);
          max_abs = std::max(max_abs, std::abs(static_cast<double>(c.x.data<float>()[r * in + k])));
          product += static_cast<double>(c.x.data<float>()[r * in + k]) * dense.data<float>()[o * in + k];
        }
        const double m = static_cast<double>(e4m3_to_float(scales[o * blocks + b])) * c.w.tensor_scale;
        value += m / 2 * s_of(a, b * 16) * static_cast<double>(d);
        magnitude += std::abs(m / 2 * s_of(a, b * 16)) * static_cast<double>(d_abs);
        bound += std::abs(m) * (max_abs / 254.0) * weight_abs;
      }
      e.value.push_back(value);
      e.magnitude.push_back(magnitude);
      e.fp32_product.push_back(product);
      e.bound.push_back(bound);
    }
  return e;
}

std::vector<float> run(const Variant& variant, const Case& c, int64_t first, int64_t last) {
  const int64_t n = c.x.dim(0), out = c.w.rows;
  std::vector<float> y(static_cast<size_t>(n * out), -7.0f);  // rows outside [first, last) must stay -7
  std::vector<const Int8Activations*> x_rows;
  std::vector<float*> y_rows;
  for (int64_t r = 0; r < n; ++r) {
    x_rows.push_back(&c.quantized[static_cast<size_t>(r)]);
    y_rows.push_back(y.data() + r * out);
  }
  const cpu::Nvfp4Rows rows{static_cast<const uint8_t*>(c.w.codes.raw()),
                            static_cast<const uint8_t*>(c.w.block_scales.raw()), c.w.cols, c.w.tensor_scale};
  cpu::nvfp4_int8_dot_rows(variant, rows, first, last, x_rows.data(), y_rows.data(), static_cast<int>(n));
  return y;
}

TEST(Nvfp4Int8Dot, EveryVariantComputesTheFormulaWithinTheBoundOfTheFp32Product) {
  const std::vector<const Variant*> variants = cpu::nvfp4_int8_dot_family().runnable();
  ASSERT_TRUE(variants.back()->isa->portable());
  uint64_t seed = 11;
  // Column counts: one block; under one chunk; an odd number of chunks; a partial chunk after an odd and after an
  // even number of full ones (the AVX-512 scale load covers two chunks); Qwen3-4B's 2560.
  for (const auto& [out, in] :
       {std::pair<int64_t, int64_t>{7, 16}, {37, 48}, {5, 384}, {9, 400}, {3, 272}, {64, 2560}}) {
    for (int64_t n : {1, 2, 3, 5, 8}) {
      for (float tensor_scale : {1.0f, 3.1e-4f}) {
        const Case c = random_case(out, in, n, ++seed, tensor_scale);
        const Expected expected = reference(c);
        for (const Variant* variant : variants) {
          const std::vector<float> y = run(*variant, c, 0, out);
          for (size_t i = 0; i < y.size(); ++i) {
            ASSERT_NEAR(y[i], expected.value[i], 1e-6 * expected.magnitude[i] + 1e-30)
                << variant->name() << " [" << out << ", " << in << "] n=" << n << " output " << i;
            ASSERT_NEAR(y[i], expected.fp32_product[i], expected.bound[i] * 1.001 + 1e-6 * expected.magnitude[i])
                << variant->name() << " [" << out << ", " << in << "] n=" << n << " output " << i;
          }
        }
      }
    }
  }
}

// The AArch64 variants sum as the portable one does (ops/cpu/arm/nvfp4_int8_dot.cpp): equal bit for bit, over the
// shapes above (partial chunks, every code and scale byte) and 1..8 rows.
TEST(Nvfp4Int8Dot, TheAArch64VariantsEqualThePortableOneBitForBit) {
  const Variant& portable = cpu::nvfp4_int8_dot_family().variant(cpu::kScalarIsa);
  int compared = 0;
  uint64_t seed = 70;
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{7, 16}, {37, 48}, {5, 384}, {9, 400}, {64, 2560}})
    for (int64_t n = 1; n <= 8; ++n) {
      const Case c = random_case(out, in, n, ++seed, n % 2 ? 1.0f : 3.1e-4f);
      const std::vector<float> expected = run(portable, c, 0, out);
      for (const Variant* variant : cpu::nvfp4_int8_dot_family().runnable()) {
        if (!sums_in_the_portable_order(*variant->isa)) continue;
        expect_same_bits(run(*variant, c, 0, out), expected, variant->name(), fmt::format("[{}, {}] n={}", out, in, n));
        ++compared;
      }
    }
  if (compared == 0) GTEST_SKIP() << "no AArch64 variant runs on this CPU";
}

TEST(Nvfp4Int8Dot, WritesOnlyTheRequestedWeightRowsAndRepeatsBitForBit) {
  const Case c = random_case(29, 400, 3, 77, 0.5f);
  for (const Variant* variant : cpu::nvfp4_int8_dot_family().runnable())
    expect_writes_only_requested_rows([&](int64_t first, int64_t last) { return run(*variant, c, first, last); }, 29, 3,
                                      7, 19, variant->name());
}

TEST(Nvfp4Int8Dot, NonFiniteActivationsGiveNonFiniteOutputs) {
  Case c = random_case(4, 256, 2, 5, 1.0f);
  c.x.data<float>()[130] = INFINITY;  // row 0, chunk 1
  c.x.data<float>()[256 + 3] = NAN;   // row 1, chunk 0
  for (int r = 0; r < 2; ++r)
    cpu::quantize_int8_activations(c.x.data<float>() + r * 256, 256, c.quantized[static_cast<size_t>(r)]);
  auto* scales = static_cast<uint8_t*>(c.w.block_scales.raw());
  for (int64_t i = 0; i < c.w.block_scales.numel(); ++i) scales[i] = 0x38;  // no zero scale hides the NaN
  for (const Variant* variant : cpu::nvfp4_int8_dot_family().runnable())
    for (float v : run(*variant, c, 0, 4)) EXPECT_FALSE(std::isfinite(v)) << variant->name();
}

TEST(Nvfp4Int8Dot, BadArgumentsAreInternalErrors) {
  const Case c = random_case(4, 32, 1, 5, 1.0f);
  const cpu::Nvfp4Rows rows{static_cast<const uint8_t*>(c.w.codes.raw()),
                            static_cast<const uint8_t*>(c.w.block_scales.raw()), 32, 1.0f};
  const Int8Activations* x = &c.quantized[0];
  float y[4];
  float* y_row = y;
  EXPECT_THROW(
      cpu::nvfp4_int8_dot_rows(cpu::nvfp4_int8_dot_family().variant(cpu::kScalarIsa), rows, 0, 4, &x, &y_row, 0),
      Error);
  EXPECT_THROW(
      cpu::nvfp4_int8_dot_rows(cpu::nvfp4_int8_dot_family().variant(cpu::kScalarIsa), rows, 0, 4, &x, &y_row, 9),
      Error);
  cpu::Nvfp4Rows wider = rows;
  wider.cols = 48;
  EXPECT_THROW(
      cpu::nvfp4_int8_dot_rows(cpu::nvfp4_int8_dot_family().variant(cpu::kScalarIsa), wider, 0, 4, &x, &y_row, 1),
      Error);
  Int8Activations odd;
  EXPECT_THROW(cpu::quantize_int8_activations(c.x.data<float>(), 24, odd), Error);
}

}  // namespace
}  // namespace nvfp4lm::test::test_nvfp4_int8_dot
