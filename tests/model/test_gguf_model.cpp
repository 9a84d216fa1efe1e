// A GGUF file as a model (io/model_files_gguf.cpp): nvfp4lm's GGUF export read back is the model it was written
// from — the configuration from the metadata, every NVFP4 weight with the ModelOpt export's codes, scale bytes and
// tensor scale, the dense weights' values, the same logits bit for bit —, other ggml types decode as llama.cpp
// decodes them, and `export FILE.gguf OUT --format bf16` writes what the ModelOpt form's dense copy holds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "io/gguf_quants.h"
#include "io/gguf_qwen3.h"
#include "io/gguf_reader.h"
#include "io/io_test_util.h"
#include "io/quantize_model.h"
#include "model/qwen3_model.h"
#include "train/dense_export.h"

namespace nvfp4lm::test::test_gguf_model {
namespace {

using gguf::GgmlType;

fs::path synth_with_tokenizer(const TempDir& dir, bool tied) {
  SynthOptions options = synth_options();
  options.tokenizer_dir = fixture_path("tiny-tokenizer");
  synth_model(small_test_config(tied), dir / "hf", options);
  return dir / "hf";
}

fs::path quantize_to(const ModelFiles& source, const fs::path& out, ModelFormat format,
                     GgmlType type = GgmlType::NVFP4) {
  QuantizeOptions options;
  options.format = format;
  options.gguf_type = type;
  quantize_model(source, out, options);
  return out;
}

Tensor as_f32(const Tensor& tensor) {
  Tensor out = Tensor::empty(tensor.shape(), DType::F32);
  convert_cpu(tensor, out);
  return out;
}

bool same_values(const Tensor& a, const Tensor& b) { return same_bytes(as_f32(a), as_f32(b)); }

TEST(GgufModel, AnExportReadsBackAsTheModelItWasWrittenFrom) {
  for (const bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    TempDir dir;
    const auto source = open_model(synth_with_tokenizer(dir, tied));
    const fs::path modelopt_dir = quantize_to(*source, dir / "mo", ModelFormat::ModeloptNvfp4);
    const fs::path gguf_path = quantize_to(*source, dir / "m.gguf", ModelFormat::Gguf);
    const auto modelopt = open_model(modelopt_dir);
    const auto gguf = open_model(gguf_path);
    ASSERT_EQ(gguf->format(), ModelFormat::Gguf);
    EXPECT_FALSE(gguf->tokenizer_dir().has_value());  // none beside the file, none given

    const Qwen3Config& a = modelopt->config();
    const Qwen3Config& b = gguf->config();
    EXPECT_EQ(b.vocab_size, a.vocab_size);
    EXPECT_EQ(b.hidden_size, a.hidden_size);
    EXPECT_EQ(b.intermediate_size, a.intermediate_size);
    EXPECT_EQ(b.num_hidden_layers, a.num_hidden_layers);
    EXPECT_EQ(b.num_attention_heads, a.num_attention_heads);
    EXPECT_EQ(b.num_key_value_heads, a.num_key_value_heads);
    EXPECT_EQ(b.head_dim, a.head_dim);
    EXPECT_EQ(b.max_position_embeddings, a.max_position_embeddings);
    EXPECT_EQ(b.tie_word_embeddings, tied);
    // llama.cpp's one end-of-sequence id: the tokenizer's (io/gguf_qwen3.h), which the GGUF carries.
    EXPECT_EQ(b.eos_token_ids, std::vector<int64_t>{GgufFile::open(gguf_path).integer("tokenizer.ggml.eos_token_id")});
    EXPECT_EQ(static_cast<float>(b.rms_norm_eps), static_cast<float>(a.rms_norm_eps));  // GGUF stores f32
    EXPECT_EQ(static_cast<float>(b.rope_theta), static_cast<float>(a.rope_theta));

    ASSERT_EQ(gguf->weights().size(), modelopt->weights().size());
    int nvfp4 = 0;
    for (const WeightInfo& info : modelopt->weights()) {
      const WeightInfo* other = gguf->find(info.name);
      ASSERT_NE(other, nullptr) << info.name;
      EXPECT_EQ(other->shape, info.shape) << info.name;
      ASSERT_EQ(other->nvfp4, info.nvfp4) << info.name;
      const ModelWeight expected = modelopt->load(info.name), got = gguf->load(info.name);
      if (!info.nvfp4) {
        EXPECT_TRUE(same_values(got.dense, expected.dense)) << info.name;
        continue;
      }
      ++nvfp4;
      EXPECT_TRUE(same_bytes(got.nvfp4.codes, expected.nvfp4.codes)) << info.name;
      EXPECT_TRUE(same_bytes(got.nvfp4.block_scales, expected.nvfp4.block_scales)) << info.name;
      EXPECT_EQ(got.nvfp4.tensor_scale, expected.nvfp4.tensor_scale) << info.name;
    }
    EXPECT_EQ(nvfp4, 14);

    const Tensor ids = Tensor::from_ints({1, 17, 90, 3, 250, 8, 77, 400, 5, 12, 301, 64}, {2, 6});
    const Tensor from_gguf = Qwen3Model::from_files(*gguf).forward(ids);
    const Tensor from_modelopt = Qwen3Model::from_files(*modelopt).forward(ids);
    EXPECT_TRUE(same_bytes(from_gguf, from_modelopt)) << "logits";

    // The dense copy of the GGUF holds what the ModelOpt form's holds.
    export_dense_model(*gguf, model_export_source(*gguf), dir / "bf16-from-gguf", {});
    export_dense_model(*modelopt, model_export_source(*modelopt), dir / "bf16-from-modelopt", {});
    const auto dense_a = open_model(dir / "bf16-from-gguf"), dense_b = open_model(dir / "bf16-from-modelopt");
    ASSERT_EQ(dense_a->weights().size(), dense_b->weights().size());
    for (const WeightInfo& info : dense_b->weights()) {
      EXPECT_EQ(dense_a->at(info.name).dtype, DType::BF16) << info.name;
      EXPECT_TRUE(same_values(dense_a->load(info.name).dense, dense_b->load(info.name).dense)) << info.name;
    }
  }
}

// q8_0 and q4_0 projections load as F32 with the values llama.cpp decodes; a tokenizer beside the file is found.
TEST(GgufModel, OtherTypesDecodeAsLlamaCppDecodesThem) {
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    TempDir dir;
    const auto source = open_model(synth_with_tokenizer(dir, true));
    fs::create_directories(dir / "beside");
    const fs::path path = quantize_to(*source, dir / "beside" / "m.gguf", ModelFormat::Gguf, type);
    fs::copy_file(fixture_path("tiny-tokenizer") / "tokenizer.json", dir / "beside" / "tokenizer.json");
    const auto gguf = open_model(path);
    ASSERT_TRUE(gguf->tokenizer_dir().has_value());
    EXPECT_EQ(*gguf->tokenizer_dir(), dir / "beside");
    const GgufFile file = GgufFile::open(path);
    const std::string name = "model.layers.1.mlp.down_proj.weight";
    const GgufTensorInfo& tensor = *file.find_tensor(gguf_tensor_name(name));
    EXPECT_EQ(tensor.type, gguf::ggml_type_name(type));
    const WeightInfo& info = gguf->at(name);
    EXPECT_FALSE(info.nvfp4);
    EXPECT_EQ(info.dtype, DType::F32);
    const Tensor loaded = gguf->load(name).dense;
    const int64_t rows = info.shape[0], cols = info.shape[1];
    std::vector<float> expected(static_cast<size_t>(rows * cols));
    const uint64_t row = gguf::row_bytes(type, cols, name);
    for (int64_t r = 0; r < rows; ++r)
      gguf::decode_row(type, file.tensor_data(tensor) + r * row, cols, expected.data() + r * cols);
    EXPECT_EQ(std::memcmp(loaded.raw(), expected.data(), expected.size() * sizeof(float)), 0);
    // and near the source's values (within the type's rounding)
    const Tensor original = as_f32(source->load(name).dense);
    double worst = 0, largest = 0;
    for (int64_t i = 0; i < rows * cols; ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(loaded.data<float>()[i]) - original.data<float>()[i]));
      largest = std::max(largest, std::fabs(static_cast<double>(original.data<float>()[i])));
    }
    EXPECT_LT(worst, (type == GgmlType::Q8_0 ? 0.01 : 0.15) * largest) << gguf::ggml_type_name(type);
  }
}

TEST(GgufModel, WhatIsNotAQwen3GgufIsOneLineError) {
  TempDir dir;
  std::string gguf("GGUF", 4);
  gguf.append("\x03\x00\x00\x00", 4);  // version 3
  gguf.append(16, '\0');               // no tensors, no metadata
  write_file(dir / "empty.gguf", gguf);
  expect_error([&] { open_model(dir / "empty.gguf"); }, {"empty.gguf", "general.architecture", "missing"});
  OpenModelOptions with_config;
  with_config.config_path = dir / "config.json";
  expect_error([&] { open_model(dir / "empty.gguf", with_config); }, {"GGUF", "drop --config"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_gguf_model
