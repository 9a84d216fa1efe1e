// A GGUF file as a model (open_model): llama.cpp's qwen3 architecture read back, the inverse of what
// io/gguf_model_writer.h writes and of io/gguf_qwen3.h's names and hyperparameters, so a GGUF export (ours or
// llama.cpp's convert_hf_to_gguf.py's of a Qwen3 checkpoint) can be run, trained over, quantized or exported densely
// (`export FILE.gguf OUT --format bf16`).
//   - config: qwen3.{embedding_length, block_count, feed_forward_length, attention.head_count[_kv],
//     attention.key_length, rope.freq_base, attention.layer_norm_rms_epsilon, context_length}; vocab_size from
//     token_embd's rows; tied when there is no output.weight (llama.cpp then reads token_embd); eos / bos from
//     tokenizer.ggml.{eos,bos}_token_id; torch_dtype from token_embd's type.
//   - weights: blk.N.attn_q.weight -> model.layers.N.self_attn.q_proj.weight and so on. ggml NVFP4 tensors are NVFP4
//     weights with their codes and scale bytes as stored (io/gguf_quants.h unpack_nvfp4_row) and the tensor scale of
//     their one-element F32 companion ("blk.N.attn_q.scale" beside "blk.N.attn_q.weight"; 1 without one); F32 / F16 /
//     BF16 tensors as stored; Q8_0, Q4_0 and Q6_K are decoded to F32 as llama.cpp decodes them (exact: every such value
//     is a float).
//   - tokenizer: OpenModelOptions::tokenizer_dir, else a tokenizer.json beside the file (the GGUF's own tokenizer
//     metadata is not converted back to tokenizer.json).
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "core/logging.h"
#include "io/gguf_quants.h"
#include "io/gguf_qwen3.h"
#include "io/gguf_reader.h"
#include "io/model_files_impl.h"

namespace nvfp4lm::detail {
namespace {

// GGUF name -> HF name, for every weight of a Qwen3 of `config`'s shape.
std::map<std::string, std::string> hf_names_by_gguf_name(const Qwen3Config& config) {
  std::map<std::string, std::string> names;
  for (const ExpectedWeight& weight : qwen3_expected_weights(config))
    names[gguf_tensor_name(weight.name)] = weight.name;
  return names;
}

int64_t positive_integer(const GgufFile& file, std::string_view key) {
  const int64_t value = file.integer(key);
  NVFP4LM_CHECK(value > 0, "{}: {} is {}; expected a positive number", file.origin(), key, value);
  return value;
}

std::string torch_dtype_name_of_ggml(std::string_view ggml_type) {
  if (ggml_type == "f16") return "float16";
  if (ggml_type == "f32") return "float32";
  return "bfloat16";
}

class GgufModelFiles final : public ModelFiles {
 public:
  explicit GgufModelFiles(const ModelLocation& location) : file_(GgufFile::open(location.path)) {
    format_ = ModelFormat::Gguf;
    path_ = location.path;
    directory_ = location.directory;
    config_path_ = location.path;  // the configuration is in the file's metadata
    tokenizer_dir_ = location.tokenizer_dir;
    const std::string& where = file_.origin();
    const std::string_view arch = file_.string("general.architecture");
    NVFP4LM_CHECK(arch == "qwen3",
                  "{}: general.architecture is '{}'; nvfp4lm runs Qwen3 models (llama.cpp's 'qwen3' architecture)",
                  where, arch);
    const GgufTensorInfo* embedding = file_.find_tensor("token_embd.weight");
    NVFP4LM_CHECK(embedding != nullptr && embedding->shape.rank() == 2, "{}: no 2-D token_embd.weight tensor", where);
    config_.vocab_size = embedding->shape[0];
    config_.hidden_size = positive_integer(file_, "qwen3.embedding_length");
    config_.num_hidden_layers = positive_integer(file_, "qwen3.block_count");
    config_.intermediate_size = positive_integer(file_, "qwen3.feed_forward_length");
    config_.num_attention_heads = positive_integer(file_, "qwen3.attention.head_count");
    config_.num_key_value_heads = positive_integer(file_, "qwen3.attention.head_count_kv");
    config_.head_dim = file_.find("qwen3.attention.key_length") ? positive_integer(file_, "qwen3.attention.key_length")
                                                                : config_.hidden_size / config_.num_attention_heads;
    config_.rms_norm_eps = file_.number("qwen3.attention.layer_norm_rms_epsilon");
    config_.rope_theta = file_.find("qwen3.rope.freq_base") ? file_.number("qwen3.rope.freq_base") : 1e6;
    if (file_.find("qwen3.context_length"))
      config_.max_position_embeddings = positive_integer(file_, "qwen3.context_length");
    config_.tie_word_embeddings = file_.find_tensor("output.weight") == nullptr;
    if (const GgufValue* bos = file_.find("tokenizer.ggml.bos_token_id"); bos && bos->integer())
      config_.bos_token_id = *bos->integer();
    if (const GgufValue* eos = file_.find("tokenizer.ggml.eos_token_id"); eos && eos->integer())
      config_.eos_token_ids = {*eos->integer()};
    config_.torch_dtype = torch_dtype_name_of_ggml(embedding->type);
    config_.validate(where);
    config_json_ = qwen3_config_to_json(config_);

    const std::map<std::string, std::string> hf_names = hf_names_by_gguf_name(config_);
    std::set<std::string, std::less<>> scale_names;  // of the NVFP4 weights: read with their weight
    for (const GgufTensorInfo& tensor : file_.tensors())
      if (tensor.type == "nvfp4" && tensor.name.ends_with(".weight"))
        scale_names.insert(gguf::nvfp4_tensor_scale_name(tensor.name));
    std::vector<WeightInfo> found;
    for (const GgufTensorInfo& tensor : file_.tensors()) {
      const std::string_view name = tensor.name;
      if (scale_names.contains(name)) {
        NVFP4LM_CHECK(tensor.type == "f32" && tensor.shape.numel() == 1,
                      "{}: {} is {} {}; the tensor scale of an NVFP4 weight is one F32", where, name, tensor.type,
                      tensor.shape.str());
        continue;
      }
      const auto hf = hf_names.find(tensor.name);
      WeightInfo info;
      info.name = hf != hf_names.end() ? hf->second : tensor.name;
      info.shape = tensor.shape;
      info.file_bytes = tensor.bytes;
      const std::optional<gguf::GgmlType> type = gguf::ggml_type_from_id(tensor.type_id);
      NVFP4LM_CHECK(type.has_value(),
                    "{}: {} is of ggml type {} ({}), which nvfp4lm does not decode (f32, f16, bf16, "
                    "q8_0, q4_0, q6_K and nvfp4 it does)",
                    where, name, tensor.type, tensor.type_id);
      if (*type == gguf::GgmlType::NVFP4) {
        NVFP4LM_CHECK(tensor.shape.rank() == 2, "{}: the NVFP4 tensor {} is {}-D; expected a matrix", where, name,
                      tensor.shape.rank());
        info.nvfp4 = true;
        info.dtype = DType::E2M1x2;
        info.storage = "GGUF nvfp4 (E2M1 codes, UE4M3 block scales, F32 tensor scale)";
        if (const GgufTensorInfo* scale = scale_of(tensor)) info.file_bytes += scale->bytes;
      } else if (*type == gguf::GgmlType::F32 || *type == gguf::GgmlType::F16 || *type == gguf::GgmlType::BF16) {
        info.dtype = *type == gguf::GgmlType::F32   ? DType::F32
                     : *type == gguf::GgmlType::F16 ? DType::F16
                                                    : DType::BF16;
        info.storage = fmt::format("GGUF {}", tensor.type);
      } else {
        info.dtype = DType::F32;
        info.storage = fmt::format("GGUF {} (decoded to F32 on load)", tensor.type);
      }
      tensors_[info.name] = &tensor;
      found.push_back(std::move(info));
    }
    finalize_weights(std::move(found));
    if (!tokenizer_dir_)
      log::info(
          "{}: the GGUF's tokenizer is not read; a command that needs one takes --tokenizer DIR (or put "
          "tokenizer.json beside the file)",
          where);
  }

  std::vector<fs::path> data_files() const override { return {path_}; }

  ModelWeight load(const std::string& name) const override {
    const WeightInfo& info = at(name);
    const GgufTensorInfo& tensor = *tensors_.at(info.name);
    const uint8_t* bytes = file_.tensor_data(tensor);
    const gguf::GgmlType type = *gguf::ggml_type_from_id(tensor.type_id);
    ModelWeight weight;
    if (type == gguf::GgmlType::NVFP4) {
      const int64_t rows = tensor.shape[0], cols = tensor.shape[1];
      Nvfp4Tensor q;
      q.rows = rows;
      q.cols = cols;
      q.codes = Tensor::empty({rows, cols / 2}, DType::E2M1x2);
      q.block_scales = Tensor::empty({rows, cols / 16}, DType::E4M3);
      const uint64_t row_bytes = gguf::row_bytes(type, cols, tensor.name);
      auto* codes = static_cast<uint8_t*>(q.codes.raw());
      auto* scales = static_cast<uint8_t*>(q.block_scales.raw());
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r)
        gguf::unpack_nvfp4_row(bytes + static_cast<uint64_t>(r) * row_bytes, cols, codes + r * (cols / 2),
                               scales + r * (cols / 16));
      q.tensor_scale = 1.0f;
      if (const GgufTensorInfo* scale = scale_of(tensor))
        std::memcpy(&q.tensor_scale, file_.tensor_data(*scale), sizeof(float));
      validate_nvfp4(q, fmt::format("{}: {}", file_.origin(), tensor.name));
      weight.nvfp4 = std::move(q);
      return weight;
    }
    if (type == gguf::GgmlType::F32 || type == gguf::GgmlType::F16 || type == gguf::GgmlType::BF16) {
      weight.dense = Tensor::empty(info.shape, info.dtype);
      std::memcpy(weight.dense.raw(), bytes, weight.dense.nbytes());
      return weight;
    }
    weight.dense = Tensor::empty(info.shape, DType::F32);
    const int64_t cols = info.shape[info.shape.rank() - 1], rows = info.shape.numel() / cols;
    const uint64_t row_bytes = gguf::row_bytes(type, cols, tensor.name);
    float* values = weight.dense.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      gguf::decode_row(type, bytes + static_cast<uint64_t>(r) * row_bytes, cols, values + r * cols);
    return weight;
  }

  void release(const std::string&) const override {}

 private:
  // The tensor scale of an NVFP4 weight "X.weight": "X.scale" (gguf::nvfp4_tensor_scale_name), or none.
  const GgufTensorInfo* scale_of(const GgufTensorInfo& weight) const {
    if (!weight.name.ends_with(".weight")) return nullptr;
    return file_.find_tensor(gguf::nvfp4_tensor_scale_name(weight.name));
  }

  GgufFile file_;
  std::map<std::string, const GgufTensorInfo*> tensors_;  // by WeightInfo::name
};

}  // namespace

std::unique_ptr<ModelFiles> open_gguf_model(const ModelLocation& location) {
  return std::make_unique<GgufModelFiles>(location);
}

}  // namespace nvfp4lm::detail
