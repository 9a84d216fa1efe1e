// The fixed-tensor-scale quantizer must be the codec's rule exactly: with the weight's own tensor scale it
// reproduces quantize_nvfp4 byte for byte (1x16 and 16x16, F32 and BF16 input), and the error it reports is
// the one of the codec's dequantization.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/test_util.h"
#include "io/io_test_util.h"
#include "quant/nvfp4.h"
#include "quant/nvfp4_fixed_scale.h"
#include "quant/tensor_amax.h"

namespace nvfp4lm::test::test_nvfp4_fixed_scale {
namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(Nvfp4FixedScale, MatchesTheCodecWithItsOwnTensorScale) {
  Rng rng(11);
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (Nvfp4Block block : {Nvfp4Block::Row1x16, Nvfp4Block::Tile16x16}) {
      Tensor weight = random_normal({48, 80}, rng, 0.02f);
      // A few outliers and exact zeros so scales vary across blocks.
      weight.data<float>()[5] = 0.9f;
      for (int i = 100; i < 116; ++i) weight.data<float>()[i] = 0.0f;
      Tensor input = weight;
      if (dtype == DType::BF16) {
        input = Tensor::empty(weight.shape(), DType::BF16);
        convert_cpu(weight, input);
      }
      Nvfp4QuantOptions options;
      options.block = block;
      const Nvfp4Tensor reference = quantize_nvfp4(input, options);
      const float own_scale = nvfp4_tensor_scale(tensor_amax(input, "w"));
      EXPECT_EQ(own_scale, reference.tensor_scale);
      const Nvfp4Tensor ours = quantize_nvfp4_with_tensor_scale(input, own_scale, block, "w");
      EXPECT_TRUE(same_bytes(ours.codes, reference.codes)) << dtype_name(dtype);
      EXPECT_TRUE(same_bytes(ours.block_scales, reference.block_scales)) << dtype_name(dtype);
      EXPECT_EQ(ours.tensor_scale, reference.tensor_scale);
    }
  }
}

TEST(Nvfp4FixedScale, OtherTensorScalesStayWithinTheCodecsDequantization) {
  Rng rng(3);
  const Tensor weight = random_normal({16, 64}, rng, 0.02f);
  for (float tensor_scale : {1.0f, nvfp4_tensor_scale(tensor_amax(weight, "w")) * 2.0f}) {
    const Nvfp4Tensor q = quantize_nvfp4_with_tensor_scale(weight, tensor_scale, Nvfp4Block::Row1x16, "w");
    validate_nvfp4(q, "w");
    EXPECT_EQ(q.tensor_scale, tensor_scale);
    const Tensor dequantized = dequantize_nvfp4(q, DType::F32);
    // Error statistics equal a direct computation on the codec's dequantization.
    double squared_error = 0, squared_norm = 0;
    const std::vector<float> values = to_float_vector(dequantized), expected = to_float_vector(weight);
    for (size_t i = 0; i < values.size(); ++i) {
      squared_error += (static_cast<double>(values[i]) - expected[i]) * (static_cast<double>(values[i]) - expected[i]);
      squared_norm += static_cast<double>(expected[i]) * expected[i];
    }
    const QuantizationError error = nvfp4_quantization_error(q, weight);
    // Same terms, summed in another order (OpenMP): equal to double rounding.
    EXPECT_NEAR(error.squared_error, squared_error, 1e-12 * squared_error);
    EXPECT_NEAR(error.squared_norm, squared_norm, 1e-12 * squared_norm);
    // NVFP4 round-to-nearest on Gaussian data: about 10% relative RMS error, never near 0 or 1.
    EXPECT_GT(error.relative_rms(), 0.03);
    EXPECT_LT(error.relative_rms(), 0.2);
  }
}

TEST(Nvfp4FixedScale, RejectsBadInput) {
  Tensor weight = Tensor::from_floats(std::vector<float>(32, 0.5f), {2, 16});
  weight.data<float>()[17] = NAN;
  expect_error([&] { quantize_nvfp4_with_tensor_scale(weight, 1.0f, Nvfp4Block::Row1x16, "layer.w"); },
               {"layer.w", "row 1, column 1"});
  expect_error([&] { tensor_amax(weight, "layer.w"); }, {"layer.w", "non-finite"});
  const Tensor odd = Tensor::from_floats(std::vector<float>(24, 0.5f), {2, 12});
  expect_error([&] { quantize_nvfp4_with_tensor_scale(odd, 1.0f, Nvfp4Block::Row1x16, "odd"); }, {"odd", "16"});
  const Tensor rows = Tensor::from_floats(std::vector<float>(32, 0.5f), {2, 16});
  expect_error([&] { quantize_nvfp4_with_tensor_scale(rows, 1.0f, Nvfp4Block::Tile16x16, "rows"); }, {"rows", "16x16"});
  expect_error([&] { quantize_nvfp4_with_tensor_scale(rows, 0.0f, Nvfp4Block::Row1x16, "rows"); }, {"tensor scale"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_nvfp4_fixed_scale
