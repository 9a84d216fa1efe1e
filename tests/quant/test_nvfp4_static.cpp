// The activation quantizer of W4A4 inference (quantize_nvfp4_static): rows quantized
// with a fixed tensor scale (a calibrated input_scale) equal the element-by-element statement of the rule
// (nvfp4_test_util.h) with that scale, including values past the calibrated range, which saturate (block scale 448,
// code ±6) as vLLM's satfinite conversions do; and they equal quantize_nvfp4 with options.tensor_scale, written into
// the caller's buffers (views of a larger one, as the inference buffers are).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/test_util.h"
#include "core/rng.h"
#include "quant/nvfp4.h"
#include "quant/nvfp4_test_util.h"

namespace nvfp4lm::test_nvfp4_static {
namespace {

// Rows of different magnitudes; row 1 holds values up to 8x the calibrated amax (saturation).
Tensor activations(int64_t rows, int64_t cols, float calibrated_amax, Rng& rng) {
  Tensor x = test::random_normal({rows, cols}, rng, calibrated_amax / 4.0f);
  float* p = x.data<float>();
  for (int64_t c = 0; c < cols; c += 7) p[cols + c] = (c % 2 ? -8.0f : 8.0f) * calibrated_amax;
  for (int64_t c = 0; c < 16; ++c) p[c] = 0.0f;  // an all-zero block
  return x;
}

std::vector<float> values_of(const Tensor& t) {
  const Tensor c = t.to(Device::cpu()).contiguous();
  std::vector<float> out(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i)
    out[static_cast<size_t>(i)] = c.dtype() == DType::F32 ? c.data<float>()[i] : bf16_to_float(c.data<uint16_t>()[i]);
  return out;
}

// Codes and scales as views of one larger buffer, like InferenceBuffers' w4a4 buffers.
Nvfp4Tensor buffer_views(Tensor& codes, Tensor& scales, int64_t rows, int64_t cols) {
  Nvfp4Tensor q;
  q.codes = codes.narrow(0, 0, rows * cols / 2).reshape({rows, cols / 2});
  q.block_scales = scales.narrow(0, 0, rows * cols / 16).reshape({rows, cols / 16});
  return q;
}

TEST(Nvfp4Static, EqualsTheRuleWithTheFixedScaleAndSaturatesPastIt) {
  Rng rng(5);
  const int64_t rows = 5, cols = 96;
  const float amax = 3.0f, input_scale = amax / (6.0f * 448.0f);
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = activations(rows, cols, amax, rng);
    if (dtype == DType::BF16) {
      Tensor bf = Tensor::empty(x.shape(), DType::BF16);
      convert_cpu(x, bf);
      x = bf;
    }
    const std::vector<float> xs = values_of(x);
    const test::ReferenceQuant ref = test::reference_quantize(xs, rows, cols, false, false, 0, input_scale);
    Tensor codes = Tensor::empty({rows * cols}, DType::E2M1x2), scales = Tensor::empty({rows * cols}, DType::E4M3);
    Nvfp4Tensor q = buffer_views(codes, scales, rows, cols);
    quantize_nvfp4_static(x, input_scale, q);
    EXPECT_EQ(q.rows, rows);
    EXPECT_EQ(q.cols, cols);
    EXPECT_EQ(q.tensor_scale, input_scale);
    EXPECT_EQ(test::codes_of(q), ref.codes);
    EXPECT_EQ(test::scales_of(q), ref.scales);
    // The same bytes as the codec told to use that scale.
    Nvfp4QuantOptions options;
    options.tensor_scale = input_scale;
    const Nvfp4Tensor codec = quantize_nvfp4(x, options);
    EXPECT_EQ(test::bytes_of(q.codes), test::bytes_of(codec.codes));
    EXPECT_EQ(test::bytes_of(q.block_scales), test::bytes_of(codec.block_scales));
    // Saturated: row 1's blocks that hold 8 * amax have scale 448 (0x7E) and those values decode to ±6 * 448 * s.
    EXPECT_EQ(test::scales_of(q)[static_cast<size_t>(cols / 16)], 0x7E);
    EXPECT_EQ(ref.values[static_cast<size_t>(cols)], 6.0f * (448.0f * input_scale));
    // Decoded, the codec's values (what the CPU reference multiplies).
    EXPECT_EQ(values_of(dequantize_nvfp4(q, DType::F32)), ref.values);
  }
}

}  // namespace
}  // namespace nvfp4lm::test_nvfp4_static
