// The one NVFP4 plan of quantize and export (io/export_plan.h) and the table of what each format holds
// (io/model_formats.h): which weights become NVFP4 per format, lm_head untying, the dense dtype, the shape check,
// and which tensor scales each format can store.
#include <gtest/gtest.h>

#include <vector>

#include "common/test_util.h"
#include "io/export_plan.h"
#include "io/weight_names.h"

namespace nvfp4lm::test::test_export_plan {
namespace {

Qwen3Config small_config(bool tied) {
  Qwen3Config config;
  config.vocab_size = 40;
  config.hidden_size = 32;
  config.intermediate_size = 48;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 2;
  config.num_key_value_heads = 1;
  config.head_dim = 16;
  config.tie_word_embeddings = tied;
  return config;
}

// The weights of `config` as a dense BF16 source.
std::vector<WeightInfo> dense_sources(const Qwen3Config& config) {
  std::vector<WeightInfo> sources;
  for (const ExpectedWeight& weight : qwen3_expected_weights(config)) {
    WeightInfo info;
    info.name = weight.name;
    info.shape = weight.shape;
    info.kind = weight.kind;
    info.dtype = DType::BF16;
    sources.push_back(std::move(info));
  }
  return sources;
}

ExportPlanOptions options_for(ModelFormat format, gguf::GgmlType gguf_type = gguf::GgmlType::NVFP4) {
  ExportPlanOptions options;
  options.format = format_capabilities(format, gguf_type);
  return options;
}

TEST(ExportPlan, ProjectionsAreNvfp4InNvfp4FormatsOnly) {
  const std::vector<WeightInfo> sources = dense_sources(small_config(false));
  for (ModelFormat format : {ModelFormat::ModeloptNvfp4, ModelFormat::Dat, ModelFormat::Gguf}) {
    const ExportPlan plan = plan_export(sources, false, options_for(format), "test");
    ASSERT_EQ(plan.weights.size(), sources.size());
    int nvfp4 = 0;
    for (const PlannedWeight& weight : plan.weights) {
      const bool projection = is_nvfp4_projection(*classify_weight_name(weight.out.name));
      EXPECT_EQ(weight.out.nvfp4, projection) << weight.out.name;
      EXPECT_EQ(weight.source, weight.out.name);
      EXPECT_EQ(weight.out.dtype, DType::BF16);
      nvfp4 += weight.out.nvfp4;
    }
    EXPECT_EQ(nvfp4, 2 * 7) << model_format_name(format);
    EXPECT_FALSE(plan.lm_head_untied);
  }
  for (const ExportPlanOptions& options :
       {options_for(ModelFormat::HfSafetensors), options_for(ModelFormat::Gguf, gguf::GgmlType::Q8_0)}) {
    ExportPlanOptions with_head = options;
    with_head.quantize_lm_head = true;
    for (const PlannedWeight& weight : plan_export(sources, false, with_head, "test").weights)
      EXPECT_FALSE(weight.out.nvfp4) << weight.out.name;
  }
}

TEST(ExportPlan, FusedGroupsAndDenseDtype) {
  ExportPlanOptions options = options_for(ModelFormat::ModeloptNvfp4);
  options.dense_dtype = DType::F32;
  const ExportPlan plan = plan_export(dense_sources(small_config(false)), false, options, "test");
  for (const PlannedWeight& weight : plan.weights) {
    EXPECT_EQ(weight.out.dtype, DType::F32) << weight.out.name;
    EXPECT_EQ(weight.scale_group, fused_scale_group(weight.out.name));
  }
  EXPECT_EQ(fused_scale_group(layer_weight_name(1, LayerWeight::KProj)), "model.layers.1.self_attn.qkv");
  EXPECT_EQ(fused_scale_group(layer_weight_name(0, LayerWeight::UpProj)), "model.layers.0.mlp.gate_up");
  EXPECT_EQ(fused_scale_group(layer_weight_name(0, LayerWeight::DownProj)),
            layer_weight_name(0, LayerWeight::DownProj));
}

TEST(ExportPlan, TiedLmHeadIsUntiedAfterTheFinalNormWhenQuantized) {
  const std::vector<WeightInfo> sources = dense_sources(small_config(true));
  ExportPlanOptions options = options_for(ModelFormat::ModeloptNvfp4);
  EXPECT_FALSE(plan_export(sources, true, options, "test").lm_head_untied);
  options.quantize_lm_head = true;
  const ExportPlan plan = plan_export(sources, true, options, "test");
  EXPECT_TRUE(plan.lm_head_untied);
  ASSERT_EQ(plan.weights.size(), sources.size() + 1);
  const PlannedWeight& final_norm = plan.weights[plan.weights.size() - 2];
  const PlannedWeight& head = plan.weights.back();
  EXPECT_EQ(final_norm.out.name, kFinalNormWeightName);
  EXPECT_EQ(head.out.name, kLmHeadWeightName);
  EXPECT_EQ(head.source, kEmbeddingWeightName);
  EXPECT_TRUE(head.out.nvfp4);
  EXPECT_EQ(head.out.shape, (Shape{40, 32}));
  EXPECT_FALSE(plan.weights.front().out.nvfp4);  // the embedding itself stays dense
  // A format without NVFP4 weights keeps the head tied.
  options.format = format_capabilities(ModelFormat::Gguf, gguf::GgmlType::Q4_0);
  EXPECT_FALSE(plan_export(sources, true, options, "test").lm_head_untied);
}

TEST(ExportPlan, Nvfp4SourcesStayNvfp4AndAreWrittenDenseAsBf16) {
  std::vector<WeightInfo> sources = dense_sources(small_config(false));
  sources[0].nvfp4 = true;  // an NVFP4 embedding (not a projection) stays NVFP4
  sources[0].dtype = DType::E2M1x2;
  EXPECT_TRUE(plan_export(sources, false, options_for(ModelFormat::Dat), "test").weights[0].out.nvfp4);
  const ExportPlan dense = plan_export(sources, false, options_for(ModelFormat::HfSafetensors), "test");
  EXPECT_FALSE(dense.weights[0].out.nvfp4);
  EXPECT_EQ(dense.weights[0].out.dtype, DType::BF16);
}

TEST(ExportPlan, ShapeCheckNamesTheWeightAndTheBlocks) {
  Qwen3Config config = small_config(false);
  config.vocab_size = 40;  // lm_head [40, 32]: 1x16 blocks fit, 16x16 tiles do not
  const std::vector<WeightInfo> sources = dense_sources(config);
  ExportPlanOptions options = options_for(ModelFormat::ModeloptNvfp4);
  options.quantize_lm_head = true;
  EXPECT_NO_THROW(plan_export(sources, false, options, "model.safetensors"));
  options.block = Nvfp4Block::Tile16x16;
  expect_error([&] { plan_export(sources, false, options, "model.safetensors"); },
               {"model.safetensors", "lm_head.weight", "[40, 32]", "rows too with 16x16 blocks"});
  options.quantize_lm_head = false;  // dense lm_head: nothing to check
  EXPECT_NO_THROW(plan_export(sources, false, options, "model.safetensors"));
}

TEST(ModelFormats, WhatEachFormatHolds) {
  const FormatCapabilities& modelopt = format_capabilities(ModelFormat::ModeloptNvfp4);
  const FormatCapabilities& dat = format_capabilities(ModelFormat::Dat);
  const FormatCapabilities& gguf_nvfp4 = format_capabilities(ModelFormat::Gguf, gguf::GgmlType::NVFP4);
  const FormatCapabilities& gguf_q8 = format_capabilities(ModelFormat::Gguf, gguf::GgmlType::Q8_0);
  const FormatCapabilities& bf16 = format_capabilities(ModelFormat::HfSafetensors);
  EXPECT_TRUE(holds_tensor_scale(modelopt, 0.37f));
  EXPECT_TRUE(holds_tensor_scale(gguf_nvfp4, 0.37f));
  EXPECT_TRUE(holds_tensor_scale(dat, 1.0f));
  EXPECT_FALSE(holds_tensor_scale(dat, 0.37f));  // .dat stores none: it reads back as 1
  EXPECT_FALSE(holds_tensor_scale(gguf_q8, 1.0f));
  EXPECT_FALSE(holds_tensor_scale(bf16, 1.0f));
  EXPECT_TRUE(modelopt.fused_groups_share_scale);
  EXPECT_FALSE(gguf_nvfp4.fused_groups_share_scale);
  EXPECT_TRUE(modelopt.activation_scales);
  for (const FormatCapabilities* other : {&dat, &gguf_nvfp4, &gguf_q8, &bf16}) EXPECT_FALSE(other->activation_scales);
}

TEST(WeightNames, LayerNamesRoundTrip) {
  for (int i = 0; i < kLayerWeightCount; ++i) {
    const auto weight = static_cast<LayerWeight>(i);
    const std::string name = layer_weight_name(12, weight);
    const auto parsed = parse_layer_weight_name(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(parsed->layer, 12);
    EXPECT_EQ(parsed->weight, weight);
  }
  EXPECT_EQ(layer_weight_name(3, LayerWeight::QProj), "model.layers.3.self_attn.q_proj.weight");
  for (const char* other : {"model.layers..self_attn.q_proj.weight", "model.layers.-1.self_attn.q_proj.weight",
                            "model.layers.0.self_attn.q_proj.bias", "model.norm.weight", "model.layers.0"})
    EXPECT_FALSE(parse_layer_weight_name(other).has_value()) << other;
}

}  // namespace
}  // namespace nvfp4lm::test::test_export_plan
