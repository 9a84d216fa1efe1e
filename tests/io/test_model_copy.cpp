// write_model_copy (io/model_copy.h): a .dat model written as ModelOpt and back is the same weights bit for bit, a
// ModelOpt model cannot become .dat unchanged (its tensor scales), a dense model cannot become NVFP4 without being
// quantized, and the BF16 copy holds the dequantized values (exact for tensor scale 1).
#include <gtest/gtest.h>

#include "io/io_test_util.h"
#include "io/model_copy.h"
#include "io/quantize_model.h"

namespace nvfp4lm::test::test_model_copy {
namespace {

void expect_same_weights(const ModelFiles& a, const ModelFiles& b) {
  ASSERT_EQ(a.weights().size(), b.weights().size());
  for (const WeightInfo& info : a.weights()) {
    const ModelWeight x = a.load(info.name), y = b.load(info.name);
    ASSERT_EQ(x.is_nvfp4(), y.is_nvfp4()) << info.name;
    if (x.is_nvfp4()) {
      EXPECT_TRUE(same_bytes(x.nvfp4.codes, y.nvfp4.codes)) << info.name;
      EXPECT_TRUE(same_bytes(x.nvfp4.block_scales, y.nvfp4.block_scales)) << info.name;
      EXPECT_EQ(x.nvfp4.tensor_scale, y.nvfp4.tensor_scale) << info.name;
    } else {
      EXPECT_EQ(x.dense.dtype(), y.dense.dtype()) << info.name;
      EXPECT_TRUE(same_bytes(x.dense, y.dense)) << info.name;
    }
  }
}

TEST(ModelCopy, DatAndModeloptHoldTheSameWeights) {
  TempDir dir;
  QuantizeOptions quantize;
  quantize.format = ModelFormat::Dat;
  quantize_model(*open_model(synth_small(dir, "dense", false)), dir / "dat", quantize);
  const auto dat = open_model(dir / "dat");
  EXPECT_EQ(copy_obstacle(*dat, ModelFormat::ModeloptNvfp4), "");
  EXPECT_EQ(copy_obstacle(*dat, ModelFormat::Dat), "");
  write_model_copy(*dat, dir / "modelopt", ModelFormat::ModeloptNvfp4);
  const auto modelopt = open_model(dir / "modelopt");
  EXPECT_EQ(modelopt->format(), ModelFormat::ModeloptNvfp4);
  expect_same_weights(*dat, *modelopt);
  write_model_copy(*modelopt, dir / "dat-again", ModelFormat::Dat);
  expect_same_weights(*dat, *open_model(dir / "dat-again"));

  // BF16: every weight dense BF16 and equal to the dequantized NVFP4 values (tensor scale 1: exact in BF16).
  write_model_copy(*dat, dir / "bf16", ModelFormat::HfSafetensors);
  const auto bf16 = open_model(dir / "bf16");
  EXPECT_EQ(bf16->format(), ModelFormat::HfSafetensors);
  for (const WeightInfo& info : dat->weights()) {
    const ModelWeight copy = bf16->load(info.name);
    ASSERT_FALSE(copy.is_nvfp4()) << info.name;
    EXPECT_EQ(copy.dense.dtype(), DType::BF16) << info.name;
    const ModelWeight original = dat->load(info.name);
    if (!original.is_nvfp4()) continue;
    Tensor as_f32 = Tensor::empty(copy.dense.shape(), DType::F32);
    convert_cpu(copy.dense, as_f32);
    EXPECT_TRUE(same_bytes(as_f32, dequantize_nvfp4(original.nvfp4, DType::F32))) << info.name;
  }
}

TEST(ModelCopy, WhatCannotBeCopiedUnchangedIsRefused) {
  TempDir dir;
  const fs::path dense = synth_small(dir, "dense", false);
  quantize_model(*open_model(dense), dir / "modelopt", {});
  const auto modelopt = open_model(dir / "modelopt");
  EXPECT_NE(copy_obstacle(*modelopt, ModelFormat::Dat).find("tensor scales"), std::string::npos);
  expect_error([&] { write_model_copy(*modelopt, dir / "dat", ModelFormat::Dat); }, {"cannot write", "tensor scales"});
  EXPECT_FALSE(fs::exists(dir / "dat"));
  const auto source = open_model(dense);
  for (const ModelFormat format : {ModelFormat::Dat, ModelFormat::ModeloptNvfp4})
    expect_error([&] { write_model_copy(*source, dir / "out", format); }, {"no NVFP4 weight", "quantize"});
  write_model_copy(*source, dir / "bf16", ModelFormat::HfSafetensors);
  expect_same_weights(*source, *open_model(dir / "bf16"));  // synth writes BF16: the copy is the model
  expect_error([&] { write_model_copy(*source, dir / "bf16", ModelFormat::HfSafetensors); }, {"bf16"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_model_copy
