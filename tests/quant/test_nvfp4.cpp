// NVFP4 CPU codec: the quantizer against the rule written out element by element, dequantization against
// the value definition, packing order, zero/tiny/huge blocks, non-finite and malformed input, idempotence,
// the per-element error bound on random data, 16x16 tiles, BF16 in/out, fake quantization, validation.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

#include "common/test_util.h"
#include "core/numeric.h"
#include "core/rng.h"
#include "quant/nvfp4.h"
#include "quant/nvfp4_test_util.h"

namespace nvfp4lm::test_nvfp4 {
namespace {

using test::codes_of;
using test::reference_quantize;
using test::scales_of;

Nvfp4QuantOptions tile_options() {
  Nvfp4QuantOptions options;
  options.block = Nvfp4Block::Tile16x16;
  return options;
}

std::vector<float> values_of(const Tensor& t) { return to_float_vector(t); }

// Rows with very different magnitudes, so block scales spread over the E4M3 range.
Tensor mixed_magnitudes(int64_t rows, int64_t cols, Rng& rng) {
  Tensor t = test::random_normal({rows, cols}, rng);
  float* p = t.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::ldexp(1.0f, static_cast<int>(rng.below(13)) - 8);
    for (int64_t c = 0; c < cols; ++c) p[r * cols + c] *= row_scale;
  }
  return t;
}

void expect_matches_reference(const Nvfp4Tensor& q, const std::vector<float>& x, bool tile, const std::string& what) {
  const test::ReferenceQuant ref = reference_quantize(x, q.rows, q.cols, tile);
  EXPECT_EQ(q.tensor_scale, ref.tensor_scale) << what;
  EXPECT_EQ(scales_of(q), ref.scales) << what;
  EXPECT_EQ(codes_of(q), ref.codes) << what;
}

TEST(Nvfp4, TensorScaleIsAmaxOver6Times448) {
  EXPECT_EQ(nvfp4_tensor_scale(0.0f), 1.0f);
  EXPECT_EQ(nvfp4_tensor_scale(2688.0f), 1.0f);
  EXPECT_EQ(nvfp4_tensor_scale(3.5f), 3.5f / 2688.0f);
  EXPECT_EQ(nvfp4_tensor_scale(1e-44f), 1.0f);  // the quotient underflows to 0
  // 1/(1/s) overflows for a subnormal s: the quotient is kept.
  EXPECT_EQ(nvfp4_tensor_scale(1e-36f), 1e-36f / 2688.0f);
}

// The scale must survive being stored as its reciprocal (compressed-tensors' weight_global_scale = 1 / s, read back by
// vLLM as 1 / weight_global_scale). Over 2^20 consecutive floats above 1/2688: every quotient no float's reciprocal
// reaches moves exactly one ulp (about 17 % of them), every other one stays, and every chosen scale s has 1/(1/s) == s.
TEST(Nvfp4, TensorScaleReadsBackThroughItsReciprocal) {
  uint32_t first;
  const float start = 1.0f;
  std::memcpy(&first, &start, sizeof first);
  int moved = 0, count = 1 << 20;
  for (int i = 0; i < count; ++i) {
    const uint32_t bits = first + static_cast<uint32_t>(i);
    float amax;
    std::memcpy(&amax, &bits, sizeof amax);
    const float quotient = amax / 2688.0f, s = nvfp4_tensor_scale(amax);
    ASSERT_EQ(1.0f / (1.0f / s), s) << amax;
    // Is the quotient some float's reciprocal? 1/x is monotonic, so such an x is next to 1/quotient.
    const float near = 1.0f / quotient;
    bool reachable = false;
    for (float x : {std::nextafter(near, 0.0f), near, std::nextafter(near, INFINITY)})
      reachable = reachable || 1.0f / x == quotient;
    if (reachable) {
      ASSERT_EQ(s, quotient) << amax;
    } else {
      ++moved;
      ASSERT_TRUE(s == std::nextafter(quotient, 0.0f) || s == std::nextafter(quotient, INFINITY)) << amax;
    }
  }
  EXPECT_GT(moved, count / 10);
  EXPECT_LT(moved, count / 4);
}

TEST(Nvfp4, QuantizeMatchesTheRuleElementByElement) {
  Rng rng(1);
  for (bool tile : {false, true}) {
    // Large enough for the parallel path (more than 2^15 elements).
    Tensor big = mixed_magnitudes(160, 256, rng);
    expect_matches_reference(quantize_nvfp4(big, tile ? tile_options() : Nvfp4QuantOptions{}), values_of(big), tile,
                             "parallel");
    Tensor x = mixed_magnitudes(48, 96, rng);
    Nvfp4QuantOptions options = tile ? tile_options() : Nvfp4QuantOptions{};
    Nvfp4Tensor q = quantize_nvfp4(x, options);
    EXPECT_EQ(q.rows, 48);
    EXPECT_EQ(q.cols, 96);
    EXPECT_EQ(q.codes.dtype(), DType::E2M1x2);
    EXPECT_EQ(q.codes.shape(), Shape({48, 48}));
    EXPECT_EQ(q.block_scales.dtype(), DType::E4M3);
    EXPECT_EQ(q.block_scales.shape(), Shape({48, 6}));
    expect_matches_reference(q, values_of(x), tile, tile ? "16x16" : "1x16");
  }
}

TEST(Nvfp4, DequantizeIsCodeTimesScaleTimesTensorScale) {
  Rng rng(2);
  Tensor x = mixed_magnitudes(17, 64, rng);
  Nvfp4Tensor q = quantize_nvfp4(x);
  const std::vector<uint8_t> codes = codes_of(q), scales = scales_of(q);
  const std::vector<float> deq = values_of(dequantize_nvfp4(q, DType::F32));
  for (int64_t r = 0; r < 17; ++r)
    for (int64_t c = 0; c < 64; ++c) {
      const size_t i = static_cast<size_t>(r * 64 + c);
      const float expected =
          e2m1_to_float(codes[i]) * (e4m3_to_float(scales[static_cast<size_t>(r * 4 + c / 16)]) * q.tensor_scale);
      ASSERT_EQ(deq[i], expected) << "row " << r << " col " << c;
    }
}

TEST(Nvfp4, PackingPutsEvenElementsInTheLowNibble) {
  // amax 6: tensor scale 6/2688, block scale 448, denominator 1 (up to rounding): codes are the values' codes.
  const std::vector<float> x = {6, 0.5f, 1, 1.5f, 2, 3, 4, -6, -0.5f, -1, -1.5f, -2, -3, -4, 0, 0.5f};
  Nvfp4Tensor q = quantize_nvfp4(Tensor::from_floats(x, {1, 16}));
  EXPECT_EQ(scales_of(q), std::vector<uint8_t>{0x7E});
  const std::vector<uint8_t> packed = test::bytes_of(q.codes);
  const std::vector<uint8_t> expected = {0x17, 0x32, 0x54, 0xF6, 0xA9, 0xCB, 0xED, 0x10};
  EXPECT_EQ(packed, expected);
  const std::vector<float> deq = values_of(dequantize_nvfp4(q, DType::F32));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(deq[i], x[i], 1e-6f) << i;
}

TEST(Nvfp4, ZeroBlocksGetScaleOneAndZeroCodes) {
  Rng rng(3);
  Tensor x = test::random_normal({4, 64}, rng);
  float* p = x.data<float>();
  for (int c = 16; c < 32; ++c) p[c] = 0.0f;                          // block 1 of row 0
  for (int c = 0; c < 64; ++c) p[2 * 64 + c] = c % 2 ? -0.0f : 0.0f;  // all of row 2
  Nvfp4Tensor q = quantize_nvfp4(x);
  const std::vector<uint8_t> scales = scales_of(q), codes = codes_of(q);
  EXPECT_EQ(scales[1], 0x38);  // ModelOpt stores 1.0 for an all-zero block
  for (int b = 0; b < 4; ++b) EXPECT_EQ(scales[static_cast<size_t>(2 * 4 + b)], 0x38);
  for (int c = 16; c < 32; ++c) EXPECT_EQ(codes[static_cast<size_t>(c)], 0);
  for (int c = 0; c < 64; ++c) EXPECT_EQ(codes[static_cast<size_t>(2 * 64 + c)], 0);
  const std::vector<float> deq = values_of(dequantize_nvfp4(q, DType::F32));
  for (int c = 16; c < 32; ++c) EXPECT_EQ(deq[static_cast<size_t>(c)], 0.0f);

  Nvfp4Tensor all_zero = quantize_nvfp4(Tensor::zeros({16, 32}, DType::F32), tile_options());
  EXPECT_EQ(all_zero.tensor_scale, 1.0f);
  for (uint8_t s : scales_of(all_zero)) EXPECT_EQ(s, 0x38);
  for (uint8_t c : codes_of(all_zero)) EXPECT_EQ(c, 0);
  for (float v : values_of(dequantize_nvfp4(all_zero, DType::BF16))) EXPECT_EQ(v, 0.0f);
}

TEST(Nvfp4, NonFiniteInputIsAnErrorNamingRowAndColumn) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float bad : {nan, inf, -inf}) {
    for (DType dtype : {DType::F32, DType::BF16}) {
      Tensor x = Tensor::zeros({5, 32}, DType::F32);
      x.data<float>()[3 * 32 + 17] = bad;
      x.data<float>()[4 * 32 + 1] = bad;  // a later one: the first is reported
      Tensor input = x;
      if (dtype == DType::BF16) {
        input = Tensor::empty({5, 32}, DType::BF16);
        convert_cpu(x, input);
      }
      for (bool fake : {false, true}) {
        try {
          if (fake) {
            Tensor out = Tensor::empty({5, 32}, DType::F32);
            fake_quantize_nvfp4(input, out, {}, "layers.3.mlp.up_proj.weight");
          } else {
            quantize_nvfp4(input, {}, "layers.3.mlp.up_proj.weight");
          }
          ADD_FAILURE() << "no error for " << bad;
        } catch (const Error& e) {
          const std::string message = e.what();
          EXPECT_NE(message.find("layers.3.mlp.up_proj.weight"), std::string::npos) << message;
          EXPECT_NE(message.find("row 3, column 17"), std::string::npos) << message;
        }
      }
    }
  }
}

TEST(Nvfp4, TheFirstNonFiniteValueIsReportedFromAParallelScan) {
  Tensor x = Tensor::zeros({256, 256}, DType::F32);
  x.data<float>()[200 * 256 + 3] = std::numeric_limits<float>::infinity();
  x.data<float>()[100 * 256 + 250] = std::numeric_limits<float>::quiet_NaN();
  try {
    quantize_nvfp4(x, {}, "w");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 100, column 250"), std::string::npos) << e.what();
  }
}

TEST(Nvfp4, MalformedInputIsAnErrorNamingTheTensorAndShape) {
  auto expect_error = [](const Tensor& x, const Nvfp4QuantOptions& options, const std::string& needle) {
    try {
      quantize_nvfp4(x, options, "model.embed");
      ADD_FAILURE() << "no error for " << x.str();
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("model.embed"), std::string::npos) << message;
      EXPECT_NE(message.find(needle), std::string::npos) << message;
    }
  };
  expect_error(Tensor::zeros({4, 24}, DType::F32), {}, "[4, 24]");
  expect_error(Tensor::zeros({24, 32}, DType::F32), tile_options(), "[24, 32]");
  expect_error(Tensor::zeros({64}, DType::F32), {}, "[64]");
  expect_error(Tensor::zeros({4, 32}, DType::F16), {}, "F16");
  expect_error(Tensor::zeros({4, 0}, DType::F32), {}, "[4, 0]");
}

TEST(Nvfp4, QuantizingADequantizedMatrixGivesItBack) {
  Rng rng(4);
  for (bool tile : {false, true}) {
    for (int trial = 0; trial < 4; ++trial) {
      Tensor x = trial % 2 ? mixed_magnitudes(32, 128, rng) : test::random_normal({32, 128}, rng, 0.02f);
      Nvfp4QuantOptions options = tile ? tile_options() : Nvfp4QuantOptions{};
      Nvfp4Tensor q1 = quantize_nvfp4(x, options);
      Tensor d1 = dequantize_nvfp4(q1, DType::F32);
      Nvfp4Tensor q2 = quantize_nvfp4(d1, options);
      EXPECT_EQ(codes_of(q2), codes_of(q1));
      EXPECT_EQ(scales_of(q2), scales_of(q1));
      // The tensor scale is recomputed from amax(d1) = 6 * fl(448 * ts), which equals amax(x) only up to fp32
      // rounding; so the values agree to a few ulps, and exactly when the tensor scale came back exactly.
      EXPECT_NEAR(q2.tensor_scale, q1.tensor_scale, 4 * q1.tensor_scale * FLT_EPSILON);
      const std::vector<float> v1 = values_of(d1), v2 = values_of(dequantize_nvfp4(q2, DType::F32));
      for (size_t i = 0; i < v1.size(); ++i) {
        if (q2.tensor_scale == q1.tensor_scale)
          ASSERT_EQ(v2[i], v1[i]) << i;
        else
          ASSERT_NEAR(v2[i], v1[i], 4 * std::fabs(v1[i]) * FLT_EPSILON) << i;
      }
    }
  }
}

// |x - deq| for one block whose exact scale is block_amax / (6 * ts) and stored scale s (denominator d = s*ts):
//  - |x| <= 6d: x/d rounds to the nearest E2M1 grid point, so the error is at most half the grid step at
//    |x|/d (0.25, 0.5 or 1 units of d), plus fp32 rounding of x/d and of the product;
//  - |x| > 6d happens only when the scale was rounded down (s < s_exact); the code saturates at 6, so the error
//    is |x| - 6d <= 6 * ts * (s_exact - s) <= 6 * ts * (half an E4M3 ulp of s_exact), at most |x| / 15 in the
//    normal E4M3 range (3 mantissa bits: half ulp <= s_exact / 16).
void expect_error_bound(const Tensor& x, bool tile, const std::string& what) {
  Nvfp4QuantOptions options = tile ? tile_options() : Nvfp4QuantOptions{};
  Nvfp4Tensor q = quantize_nvfp4(x, options);
  const std::vector<float> v = values_of(x), deq = values_of(dequantize_nvfp4(q, DType::F32));
  const std::vector<uint8_t> scales = scales_of(q);
  const int64_t rows = q.rows, cols = q.cols;
  int64_t saturated = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 16; ++b) {
      const int64_t r0 = tile ? r / 16 * 16 : r, r1 = tile ? r0 + 16 : r + 1;
      float block_amax = 0;
      for (int64_t rr = r0; rr < r1; ++rr)
        for (int64_t c = b * 16; c < b * 16 + 16; ++c)
          block_amax = std::max(block_amax, std::fabs(v[static_cast<size_t>(rr * cols + c)]));
      const double s_exact = block_amax / (6.0 * q.tensor_scale);
      const uint8_t scale_byte = scales[static_cast<size_t>(r * (cols / 16) + b)];
      const double s = e4m3_to_float(scale_byte);
      if (s_exact >= 0.015625) {  // normal E4M3 range: RNE with 3 mantissa bits
        ASSERT_LE(std::fabs(s - s_exact), s_exact / 16 * (1 + 1e-6)) << what;
      }
      const double d = s * q.tensor_scale;
      for (int64_t c = b * 16; c < b * 16 + 16; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c);
        const double a = std::fabs(static_cast<double>(v[i]));
        const double error = std::fabs(static_cast<double>(v[i]) - deq[i]);
        const double slack = 4e-7 * a + 1e-30;
        if (a <= 6 * d) {
          ASSERT_LE(error, d * test::e2m1_half_step(static_cast<float>(a / d)) + slack)
              << what << " row " << r << " col " << c << " x " << v[i] << " deq " << deq[i];
        } else {
          ++saturated;
          ASSERT_LE(error, 6 * q.tensor_scale * std::fabs(s_exact - s) * (1 + 1e-6) + slack) << what;
          ASSERT_EQ(std::fabs(deq[i]), 6.0f * nvfp4_dequant_scale(scale_byte, q.tensor_scale)) << what;
        }
      }
    }
  }
  testing::Test::RecordProperty(what + "_saturated", static_cast<int>(saturated));
}

TEST(Nvfp4, ErrorIsWithinHalfAGridStepOfTheBlockScale) {
  Rng rng(5);
  for (bool tile : {false, true}) {
    expect_error_bound(test::random_normal({64, 256}, rng, 0.02f), tile, "normal");
    expect_error_bound(test::random_uniform({32, 128}, rng, -3.0f, 3.0f), tile, "uniform");
    expect_error_bound(mixed_magnitudes(64, 128, rng), tile, "mixed");
    Tensor heavy = test::random_normal({32, 256}, rng);
    for (int64_t i = 0; i < heavy.numel(); ++i) heavy.data<float>()[i] *= std::exp(2.0f * rng.normal());
    expect_error_bound(heavy, tile, "heavy-tailed");
  }
}

TEST(Nvfp4, TinyBlocksUseTheSmallestSubnormalScale) {
  // One block 2^-30 times smaller than the tensor amax: its exact scale underflows E4M3, so it is raised to
  // 2^-9 (byte 1) rather than rounded to zero, and its values still quantize within the bound.
  Rng rng(6);
  Tensor x = test::random_normal({2, 32}, rng);
  float* p = x.data<float>();
  p[0] = 100.0f;
  for (int c = 48; c < 64; ++c) p[c] = 1e-7f * (c - 55.5f);
  Nvfp4Tensor q = quantize_nvfp4(x);
  EXPECT_EQ(scales_of(q)[3], 0x01);
  expect_matches_reference(q, values_of(x), false, "tiny block");
  expect_error_bound(x, false, "tiny block");
  // A whole matrix of tiny normal floats: ordinary behaviour, just scaled.
  Tensor tiny = test::random_normal({16, 64}, rng, 1e-30f);
  expect_error_bound(tiny, false, "tiny matrix");
  expect_error_bound(tiny, true, "tiny matrix");
  // Subnormal floats so small that the tensor scale underflows: tensor scale 1, everything quantizes to 0.
  Tensor subnormal = Tensor::from_floats(std::vector<float>(32, 1e-44f), {2, 16});
  Nvfp4Tensor qs = quantize_nvfp4(subnormal);
  EXPECT_EQ(qs.tensor_scale, 1.0f);
  validate_nvfp4(qs, "subnormal");
  for (float v : values_of(dequantize_nvfp4(qs, DType::F32))) EXPECT_EQ(v, 0.0f);
}

TEST(Nvfp4, HugeValuesStayFinite) {
  Rng rng(7);
  for (float top : {FLT_MAX, 3e38f, 1e38f}) {
    Tensor x = test::random_normal({16, 48}, rng, top / 8);
    float* p = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = std::clamp(p[i], -top, top);
    p[5] = top;
    p[40] = -top;
    Nvfp4Tensor q = quantize_nvfp4(x);
    EXPECT_EQ(scales_of(q)[0], 0x7E);  // the block holding the amax uses the largest scale, 448
    EXPECT_EQ(codes_of(q)[5], 7);      // and the amax itself code 6
    EXPECT_EQ(codes_of(q)[40], 15);
    const std::vector<float> deq = values_of(dequantize_nvfp4(q, DType::F32));
    for (float v : deq) ASSERT_TRUE(std::isfinite(v)) << top;
    EXPECT_NEAR(deq[5], top, top * 1e-6f);
    expect_error_bound(x, false, "huge");
  }
}

TEST(Nvfp4, TilesOf16RowsShareOneScale) {
  Rng rng(8);
  Tensor x = mixed_magnitudes(32, 64, rng);
  Nvfp4Tensor q = quantize_nvfp4(x, tile_options());
  const std::vector<uint8_t> scales = scales_of(q);
  for (int64_t r = 0; r < 32; ++r)
    for (int64_t b = 0; b < 4; ++b)
      EXPECT_EQ(scales[static_cast<size_t>(r * 4 + b)], scales[static_cast<size_t>((r / 16 * 16) * 4 + b)]);
  expect_matches_reference(q, values_of(x), true, "tile");
  // With rows of different magnitudes, 1x16 blocks give different scales.
  EXPECT_NE(scales_of(quantize_nvfp4(x)), scales);
}

TEST(Nvfp4, Bf16InputQuantizesLikeItsF32Values) {
  Rng rng(9);
  Tensor x = mixed_magnitudes(32, 80, rng);
  Tensor bf = Tensor::empty({32, 80}, DType::BF16);
  convert_cpu(x, bf);
  for (bool tile : {false, true}) {
    Nvfp4QuantOptions options = tile ? tile_options() : Nvfp4QuantOptions{};
    Nvfp4Tensor from_bf16 = quantize_nvfp4(bf, options);
    Nvfp4Tensor from_f32 = quantize_nvfp4(Tensor::from_floats(values_of(bf), {32, 80}), options);
    EXPECT_EQ(from_bf16.tensor_scale, from_f32.tensor_scale);
    EXPECT_EQ(codes_of(from_bf16), codes_of(from_f32));
    EXPECT_EQ(scales_of(from_bf16), scales_of(from_f32));
  }
}

TEST(Nvfp4, Bf16OutputIsTheRoundedF32Output) {
  Rng rng(10);
  Nvfp4Tensor q = quantize_nvfp4(mixed_magnitudes(16, 64, rng));
  const std::vector<float> f32 = values_of(dequantize_nvfp4(q, DType::F32));
  Tensor bf = dequantize_nvfp4(q, DType::BF16);
  EXPECT_EQ(bf.dtype(), DType::BF16);
  const uint16_t* p = bf.data<uint16_t>();
  for (size_t i = 0; i < f32.size(); ++i) ASSERT_EQ(p[i], float_to_bf16(f32[i])) << i;
}

TEST(Nvfp4, FakeQuantizeEqualsQuantizeThenDequantize) {
  Rng rng(11);
  Tensor x = mixed_magnitudes(32, 48, rng);
  Tensor bf = Tensor::empty({32, 48}, DType::BF16);
  convert_cpu(x, bf);
  for (const Tensor& input : {x, bf})
    for (bool tile : {false, true})
      for (bool stochastic : {false, true})
        for (DType out_dtype : {DType::F32, DType::BF16}) {
          Nvfp4QuantOptions options = tile ? tile_options() : Nvfp4QuantOptions{};
          options.rounding = stochastic ? Rounding::Stochastic : Rounding::NearestEven;
          options.seed = 99;
          Tensor fake = Tensor::empty({32, 48}, out_dtype);
          fake_quantize_nvfp4(input, fake, options);
          Tensor expected = dequantize_nvfp4(quantize_nvfp4(input, options), out_dtype);
          EXPECT_EQ(test::bytes_of(fake), test::bytes_of(expected))
              << dtype_name(input.dtype()) << (tile ? " tile" : " row") << (stochastic ? " stochastic" : " rne")
              << " -> " << dtype_name(out_dtype);
        }
  Tensor wrong = Tensor::empty({32, 32}, DType::F32);
  EXPECT_THROW(fake_quantize_nvfp4(x, wrong), Error);
}

TEST(Nvfp4, StridedInputQuantizesLikeItsContiguousCopy) {
  Rng rng(12);
  Tensor x = test::random_normal({32, 48}, rng);
  Tensor transposed = x.transpose(0, 1);  // [48, 32] view
  Nvfp4Tensor a = quantize_nvfp4(transposed), b = quantize_nvfp4(transposed.contiguous());
  EXPECT_EQ(codes_of(a), codes_of(b));
  EXPECT_EQ(scales_of(a), scales_of(b));
}

TEST(Nvfp4, ValidateChecksLayoutAndScales) {
  Rng rng(13);
  Nvfp4Tensor q = quantize_nvfp4(test::random_normal({8, 32}, rng));
  EXPECT_NO_THROW(validate_nvfp4(q, "ok"));
  Nvfp4Tensor u8 = q;
  u8.codes = q.codes.view_as(DType::U8);
  EXPECT_NO_THROW(validate_nvfp4(u8, "u8 codes"));

  auto expect_invalid = [](const Nvfp4Tensor& bad, const std::string& needle) {
    try {
      validate_nvfp4(bad, "file.safetensors: layers.0.q_proj");
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("file.safetensors: layers.0.q_proj"), std::string::npos) << message;
      EXPECT_NE(message.find(needle), std::string::npos) << message;
    }
  };
  Nvfp4Tensor bad = q;
  bad.codes = Tensor::zeros({8, 15}, DType::E2M1x2);
  expect_invalid(bad, "codes");
  bad = q;
  bad.codes = q.codes.view_as(DType::I8);
  expect_invalid(bad, "codes");
  bad = q;
  bad.block_scales = Tensor::zeros({8, 3}, DType::E4M3);
  expect_invalid(bad, "block scales");
  bad = q;
  bad.block_scales = q.block_scales.view_as(DType::U8);
  expect_invalid(bad, "block scales");
  bad = q;
  bad.cols = 24;
  expect_invalid(bad, "[8, 24]");
  for (float scale : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    bad = q;
    bad.tensor_scale = scale;
    expect_invalid(bad, "tensor scale");
  }
  bad = q;
  bad.block_scales = q.block_scales.clone();
  static_cast<uint8_t*>(bad.block_scales.raw())[5] = 0xFF;
  expect_invalid(bad, "row 2, block 1");
  // Dequantization refuses a bad layout too.
  bad = q;
  bad.tensor_scale = 0.0f;
  EXPECT_THROW(dequantize_nvfp4(bad, DType::F32), Error);
}

}  // namespace
}  // namespace nvfp4lm::test_nvfp4
