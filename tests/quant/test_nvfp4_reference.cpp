// Cross-check with the Python reference codec (tests/reference/nvfp4_ref.py, which the model fixtures use):
// the fixture holds a 32x48 matrix and what the Python side made of it in 1x16 and 16x16 mode (tensor scale,
// packed codes, scale bytes, F32 and BF16 dequantized values); the C++ codec must reproduce every byte.
// Regenerate with: python3 tests/reference/nvfp4_ref.py
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "quant/nvfp4.h"
#include "quant/nvfp4_test_util.h"

namespace nvfp4lm::test_nvfp4_reference {
namespace {

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> bytes(hex.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  return bytes;
}

TEST(Nvfp4Reference, MatchesThePythonCodecBitForBit) {
  const nlohmann::json fixture =
      nlohmann::json::parse(test::read_file(test::fixture_path("nvfp4/reference_case.json")));
  const int64_t rows = fixture.at("rows"), cols = fixture.at("cols");
  const std::vector<uint8_t> input = from_hex(fixture.at("input_f32"));
  ASSERT_EQ(input.size(), static_cast<size_t>(rows * cols * 4));
  Tensor x = Tensor::empty({rows, cols}, DType::F32);
  std::memcpy(x.raw(), input.data(), input.size());

  for (const char* mode : {"1d", "2d"}) {
    SCOPED_TRACE(mode);
    const nlohmann::json& expected = fixture.at(mode);
    Nvfp4QuantOptions options;
    options.block = std::string(mode) == "2d" ? Nvfp4Block::Tile16x16 : Nvfp4Block::Row1x16;
    Nvfp4Tensor q = quantize_nvfp4(x, options);
    float tensor_scale;
    const std::vector<uint8_t> scale_bytes = from_hex(expected.at("tensor_scale_f32"));
    ASSERT_EQ(scale_bytes.size(), 4u);
    std::memcpy(&tensor_scale, scale_bytes.data(), 4);
    EXPECT_EQ(q.tensor_scale, tensor_scale);
    EXPECT_EQ(test::bytes_of(q.codes), from_hex(expected.at("codes")));
    EXPECT_EQ(test::bytes_of(q.block_scales), from_hex(expected.at("scales")));
    EXPECT_EQ(test::bytes_of(dequantize_nvfp4(q, DType::F32)), from_hex(expected.at("dequant_f32")));
    EXPECT_EQ(test::bytes_of(dequantize_nvfp4(q, DType::BF16)), from_hex(expected.at("dequant_bf16")));
  }
}

}  // namespace
}  // namespace nvfp4lm::test_nvfp4_reference
