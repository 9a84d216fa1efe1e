// Qwen3 models written as GGUF by `quantize --format gguf` (io/gguf_model_writer.h): llama.cpp's names and
// hyperparameters, the tokenizer in the metadata, the NVFP4 weights bit for bit the ModelOpt export's (codes, scale
// bytes, and the tensor scale as "<name>.scale"), dense tensors as stored, and the other --gguf-type choices.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/test_util.h"
#include "io/gguf_model_writer.h"
#include "io/gguf_quants.h"
#include "io/gguf_qwen3.h"
#include "io/gguf_reader.h"
#include "io/io_test_util.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::test::test_gguf_export {
namespace {

using gguf::GgmlType;

Tensor as_f32(const Tensor& tensor) {
  Tensor out = Tensor::empty(tensor.shape(), DType::F32);
  convert_cpu(tensor, out);
  return out;
}

// small_test_config (vocab 512) with the 512-token fixture tokenizer beside it.
fs::path synth_with_tokenizer(const TempDir& dir, const std::string& name, bool tied = true) {
  SynthOptions options = synth_options();
  options.tokenizer_dir = fixture_path("tiny-tokenizer");
  synth_model(small_test_config(tied), dir / name, options);
  return dir / name;
}

fs::path quantize_to(const ModelFiles& source, const fs::path& out, ModelFormat format, GgmlType type = GgmlType::NVFP4,
                     bool lm_head = false) {
  QuantizeOptions options;
  options.format = format;
  options.gguf_type = type;
  options.quantize_lm_head = lm_head;
  quantize_model(source, out, options);
  return out;
}

TEST(GgufExport, NamesHyperparametersAndTokenizer) {
  TempDir dir;
  const auto source = open_model(synth_with_tokenizer(dir, "hf"));
  const GgufFile file = GgufFile::open(quantize_to(*source, dir / "m.gguf", ModelFormat::Gguf));
  const Qwen3Config& c = source->config();
  EXPECT_EQ(file.string("general.architecture"), "qwen3");
  EXPECT_EQ(file.integer("general.file_type"), 39);  // LLAMA_FTYPE_MOSTLY_NVFP4
  EXPECT_EQ(file.integer("qwen3.block_count"), c.num_hidden_layers);
  EXPECT_EQ(file.integer("qwen3.embedding_length"), c.hidden_size);
  EXPECT_EQ(file.integer("qwen3.feed_forward_length"), c.intermediate_size);
  EXPECT_EQ(file.integer("qwen3.attention.head_count"), c.num_attention_heads);
  EXPECT_EQ(file.integer("qwen3.attention.head_count_kv"), c.num_key_value_heads);
  EXPECT_EQ(file.integer("qwen3.attention.key_length"), c.head_dim);
  EXPECT_EQ(file.integer("qwen3.attention.value_length"), c.head_dim);
  EXPECT_EQ(file.integer("qwen3.context_length"), c.max_position_embeddings);
  EXPECT_EQ(file.number("qwen3.rope.freq_base"), static_cast<float>(c.rope_theta));
  EXPECT_EQ(file.number("qwen3.attention.layer_norm_rms_epsilon"), static_cast<float>(c.rms_norm_eps));

  const Tokenizer tokenizer = Tokenizer::load(fixture_path("tiny-tokenizer"));
  EXPECT_EQ(file.string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(file.string("tokenizer.ggml.pre"), "qwen2");
  const GgufValue& tokens = *file.find("tokenizer.ggml.tokens");
  const GgufValue& types = *file.find("tokenizer.ggml.token_type");
  ASSERT_EQ(tokens.size(), static_cast<size_t>(c.vocab_size));
  ASSERT_EQ(types.size(), static_cast<size_t>(c.vocab_size));
  int control = 0;
  for (int32_t id = 0; id < static_cast<int32_t>(tokenizer.vocab_size()); ++id) {
    if (!tokenizer.is_used(id)) continue;
    EXPECT_EQ(tokens.strings[static_cast<size_t>(id)], tokenizer.token_text(id)) << id;
    const int64_t type = types.signed_values[static_cast<size_t>(id)];
    EXPECT_EQ(type, tokenizer.is_special(id) ? 3 : tokenizer.is_added(id) ? type : 1) << id;
    control += type == 3;
  }
  EXPECT_GT(control, 0);
  const int32_t im_end = *tokenizer.token_id("<|im_end|>");
  EXPECT_EQ(types.signed_values[static_cast<size_t>(im_end)], 3);
  EXPECT_EQ(file.integer("tokenizer.ggml.eos_token_id"), tokenizer.special_ids().eos);
  const GgufValue& merges = *file.find("tokenizer.ggml.merges");
  ASSERT_EQ(merges.size(), tokenizer.merge_count());
  const auto [left, right] = tokenizer.merge(0);
  EXPECT_EQ(merges.strings[0], fmt::format("{} {}", tokenizer.token_text(left), tokenizer.token_text(right)));
  EXPECT_EQ(file.find("tokenizer.ggml.add_bos_token")->unsigned_values, std::vector<uint64_t>{0});
  if (!tokenizer.chat_template_source().empty()) {
    EXPECT_EQ(file.string("tokenizer.chat_template"), tokenizer.chat_template_source());
  }

  // Tied: no output.weight (llama.cpp reads token_embd); every tensor named the llama.cpp way.
  EXPECT_EQ(file.find_tensor("output.weight"), nullptr);
  for (const char* name :
       {"token_embd.weight", "output_norm.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight",
        "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight", "blk.0.attn_q_norm.weight",
        "blk.0.attn_k_norm.weight", "blk.0.ffn_norm.weight", "blk.1.ffn_gate.weight", "blk.1.ffn_up.weight",
        "blk.1.ffn_down.weight", "blk.1.ffn_down.scale"})
    EXPECT_NE(file.find_tensor(name), nullptr) << name;
  EXPECT_EQ(file.tensors().size(), 2 + 11 * 2 + 7 * 2u);
}

TEST(GgufExport, Nvfp4WeightsAreTheModeloptBitsAndTensorScales) {
  TempDir dir;
  const auto source = open_model(synth_with_tokenizer(dir, "hf"));
  const auto modelopt = open_model(quantize_to(*source, dir / "mo", ModelFormat::ModeloptNvfp4));
  const GgufFile file = GgufFile::open(quantize_to(*source, dir / "m.gguf", ModelFormat::Gguf));
  int nvfp4 = 0;
  for (const WeightInfo& info : modelopt->weights()) {
    const GgufTensorInfo* tensor = file.find_tensor(gguf_tensor_name(info.name));
    ASSERT_NE(tensor, nullptr) << info.name;
    EXPECT_EQ(tensor->shape, info.shape) << info.name;
    const ModelWeight weight = modelopt->load(info.name);
    if (!info.nvfp4) {
      const Tensor dense = weight.dense;
      const bool norm = info.shape.rank() == 1;
      EXPECT_EQ(tensor->type, norm ? "f32" : "bf16") << info.name;
      const Tensor expected = norm ? as_f32(dense) : dense;
      ASSERT_EQ(tensor->bytes, expected.nbytes()) << info.name;
      EXPECT_EQ(std::memcmp(file.tensor_data(*tensor), expected.contiguous().raw(), tensor->bytes), 0) << info.name;
      continue;
    }
    ++nvfp4;
    EXPECT_EQ(tensor->type, "nvfp4") << info.name;
    const Nvfp4Tensor& q = weight.nvfp4;
    std::vector<uint8_t> codes(static_cast<size_t>(q.rows * q.cols / 2)),
        scales(static_cast<size_t>(q.rows * q.cols / 16));
    const uint64_t row = gguf::row_bytes(GgmlType::NVFP4, q.cols, info.name);
    for (int64_t r = 0; r < q.rows; ++r)
      gguf::unpack_nvfp4_row(file.tensor_data(*tensor) + r * row, q.cols, codes.data() + r * q.cols / 2,
                             scales.data() + r * q.cols / 16);
    EXPECT_EQ(std::memcmp(codes.data(), q.codes.contiguous().raw(), codes.size()), 0) << info.name;
    EXPECT_EQ(std::memcmp(scales.data(), q.block_scales.contiguous().raw(), scales.size()), 0) << info.name;
    const std::string scale_name = gguf_tensor_name(info.name);
    const GgufTensorInfo* scale = file.find_tensor(scale_name.substr(0, scale_name.size() - 7) + ".scale");
    ASSERT_NE(scale, nullptr) << info.name;
    EXPECT_EQ(scale->type, "f32");
    float value;
    std::memcpy(&value, file.tensor_data(*scale), 4);
    EXPECT_EQ(value, q.tensor_scale) << info.name;  // weight_scale_2, bit for bit
  }
  EXPECT_EQ(nvfp4, 14);

  // An NVFP4 source is copied as it is (ModelOpt -> GGUF): the same file again.
  const fs::path again = quantize_to(*modelopt, dir / "again.gguf", ModelFormat::Gguf);
  const GgufFile copy = GgufFile::open(again);
  for (const GgufTensorInfo& tensor : file.tensors()) {
    const GgufTensorInfo* other = copy.find_tensor(tensor.name);
    ASSERT_NE(other, nullptr) << tensor.name;
    ASSERT_EQ(other->bytes, tensor.bytes);
    EXPECT_EQ(std::memcmp(copy.tensor_data(*other), file.tensor_data(tensor), tensor.bytes), 0) << tensor.name;
  }
}

TEST(GgufExport, UntiedQuantizedLmHeadIsOutput) {
  TempDir dir;
  const auto source = open_model(synth_with_tokenizer(dir, "hf"));
  const GgufFile file = GgufFile::open(quantize_to(*source, dir / "m.gguf", ModelFormat::Gguf, GgmlType::NVFP4, true));
  ASSERT_NE(file.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("output.weight")->type, "nvfp4");
  EXPECT_NE(file.find_tensor("output.scale"), nullptr);
  EXPECT_EQ(file.find_tensor("token_embd.weight")->type, "bf16");
}

TEST(GgufExport, OtherTypesEncodeTheSourceValues) {
  TempDir dir;
  const auto source = open_model(synth_with_tokenizer(dir, "hf", /*tied=*/false));
  for (const GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::F16, GgmlType::BF16}) {
    const fs::path path = dir / fmt::format("{}.gguf", gguf::ggml_type_name(type));
    const GgufFile file = GgufFile::open(quantize_to(*source, path, ModelFormat::Gguf, type));
    EXPECT_EQ(file.integer("general.file_type"), gguf::llama_file_type(type));
    for (const WeightInfo& info : source->weights()) {
      const GgufTensorInfo& tensor = *file.find_tensor(gguf_tensor_name(info.name));
      const bool table = info.kind == WeightKind::Embedding || info.kind == WeightKind::LmHead;
      std::string expected(gguf::ggml_type_name(type));
      if (info.shape.rank() == 1) expected = "f32";
      // q4_0 puts the tables in q6_K, whose 256-element block does not divide a row of 64: q8_0 then.
      if (table && type == GgmlType::Q4_0) expected = "q8_0";
      EXPECT_EQ(tensor.type, expected) << info.name;
      EXPECT_EQ(file.find_tensor(tensor.name.substr(0, tensor.name.size() - 7) + ".scale"), nullptr);
      // Decoded values are within the type's rounding of the source.
      const Tensor values = as_f32(source->load(info.name).dense);
      const int64_t cols = info.shape[info.shape.rank() - 1];
      std::vector<float> decoded(static_cast<size_t>(cols));
      const GgmlType stored = *gguf::ggml_type_from_name(tensor.type);
      double error = 0, norm = 0;
      for (int64_t r = 0; r < info.shape.numel() / cols; ++r) {
        gguf::decode_row(stored, file.tensor_data(tensor) + r * gguf::row_bytes(stored, cols, tensor.name), cols,
                         decoded.data());
        for (int64_t k = 0; k < cols; ++k) {
          const double v = values.data<float>()[r * cols + k];
          error += (decoded[static_cast<size_t>(k)] - v) * (decoded[static_cast<size_t>(k)] - v);
          norm += v * v;
        }
      }
      const double bound = stored == GgmlType::Q4_0 ? 0.12 : stored == GgmlType::Q8_0 ? 0.01 : 1e-6;
      EXPECT_LE(std::sqrt(error / norm), bound) << info.name << " as " << tensor.type;
    }
  }
}

TEST(GgufExport, RefusesWhatGgufCannotHold) {
  TempDir dir;
  Qwen3Config narrow = small_test_config();
  narrow.hidden_size = 32;  // q/k/v take rows of 32: not whole 64-element NVFP4 blocks
  narrow.num_attention_heads = 2;
  narrow.num_key_value_heads = 1;
  SynthOptions options = synth_options();
  options.tokenizer_dir = fixture_path("tiny-tokenizer");
  synth_model(narrow, dir / "narrow", options);
  const auto source = open_model(dir / "narrow");
  expect_error([&] { quantize_to(*source, dir / "n.gguf", ModelFormat::Gguf); }, {"q_proj", "64", "--gguf-type q8_0"});
  EXPECT_FALSE(fs::exists(dir / "n.gguf"));
  quantize_to(*source, dir / "n8.gguf", ModelFormat::Gguf, GgmlType::Q8_0);  // fine as q8_0

  const auto no_tokenizer = open_model(synth_small(dir, "bare"));
  expect_error([&] { quantize_to(*no_tokenizer, dir / "b.gguf", ModelFormat::Gguf); },
               {"b.gguf", "tokenizer.json", "--tokenizer"});
  expect_error([&] { parse_gguf_type("q5_k"); }, {"q5_k", "nvfp4, q4_0, q8_0, f16 or bf16"});
  // A GGUF is a model too now (io/model_files_gguf.cpp; tests/model/test_gguf_model.cpp).
  EXPECT_EQ(open_model(dir / "n8.gguf")->format(), ModelFormat::Gguf);
}

}  // namespace
}  // namespace nvfp4lm::test::test_gguf_export
