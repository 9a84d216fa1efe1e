// One entry point for every model the user can name (DESIGN.md §1): open_model(path) detects the format,
// validates it and exposes the weights under their Hugging Face names.
//   - HF directory: config.json + model.safetensors (or model.safetensors.index.json with shards);
//   - ModelOpt NVFP4 directory: the same plus hf_quant_config.json (or quantization_config.quant_method
//     "modelopt" in config.json); quantized linears as in io/modelopt.h;
//   - compressed-tensors NVFP4 directory (llm-compressor's): quantization_config.quant_method
//     "compressed-tensors" with the NVFP4 or NVFP4A16 scheme; quantized linears as in io/compressed_tensors.h;
//   - `.dat` file (io/dat_format.h): config.json beside it or given in options; also a directory holding one
//     .dat file and config.json (what `quantize --format dat` writes);
//   - GGUF file of llama.cpp's qwen3 architecture (io/model_files_gguf.cpp): configuration from its metadata, NVFP4
//     tensors as NVFP4 weights, other ggml types decoded; the tokenizer from options or a tokenizer.json beside it.
// Detection never guesses: a directory with both safetensors and .dat files, several .dat files, a
// quantization method we cannot read, or no config.json is an Error that says what was found and what is
// expected.
//
// Weights: every weight the config needs (io/weight_names.h) must be present with the right shape (Error names
// the first missing or misshapen one); dense weights must be F32/BF16/F16. load() returns a dense CPU tensor
// (zero-copy views of the mapping where alignment allows) or an Nvfp4Tensor (codes, E4M3 block scales, tensor
// scale; 1 for .dat). Names that are not Qwen3 weights are listed with kind = nullopt and a warning.
// Zero-copy tensors are READ-ONLY views of a private read-only mapping: writing through data<T>() faults.
// clone() (or convert into your own storage) before modifying a loaded weight.
//
// Legacy .dat files whose NVFP4 scales are float16/float32 (a buggy exporter of the predecessor) cannot be
// represented as E4M3 bytes; such weights are dequantized on load into a dense F32 tensor, which is exact
// (code * scale has at most 2 significant bits times the scale's, so the fp32 product is exact), and are
// listed as dense with a storage note.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/files.h"
#include "core/tensor.h"
#include "io/hf_config.h"
#include "io/weight_names.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

// Gguf: llama.cpp's one-file format (written by io/gguf_model_writer.h, read by io/model_files_gguf.cpp).
enum class ModelFormat { HfSafetensors, ModeloptNvfp4, CompressedTensorsNvfp4, Dat, Gguf };
// "hf-safetensors", "modelopt-nvfp4", "compressed-tensors-nvfp4", "dat", "gguf"
std::string_view model_format_name(ModelFormat format);

struct WeightInfo {
  std::string name;                // HF name
  Shape shape;                     // logical shape; [out, in] for NVFP4 weights too
  std::optional<WeightKind> kind;  // nullopt: not a Qwen3 weight (listed, ignored by the model)
  bool nvfp4 = false;              // load() returns an Nvfp4Tensor
  DType dtype = DType::F32;        // dense: the dtype load() returns; NVFP4: E2M1x2
  std::string storage;             // for people: "BF16", "NVFP4 (E2M1 + E4M3 block scales + F32 tensor scale)", ...
  uint64_t file_bytes = 0;         // bytes it takes in the file(s), scales included
};

struct ModelWeight {
  Tensor dense;       // set for dense weights
  Nvfp4Tensor nvfp4;  // set for NVFP4 weights
  // NVFP4 weights of a W4A4 checkpoint (ModelOpt's input_scale): the fixed tensor scale its linear's input is quantized
  // with at inference (ops: quantize_nvfp4_static); 0 for weight-only NVFP4 and every other weight.
  float input_scale = 0.0f;
  bool is_nvfp4() const { return nvfp4.defined(); }
};

struct OpenModelOptions {
  std::optional<fs::path> config_path;    // config.json when it is not in the model directory / beside the .dat
  std::optional<fs::path> tokenizer_dir;  // overrides the model directory's tokenizer
};

class ModelFiles {
 public:
  virtual ~ModelFiles() = default;

  ModelFormat format() const { return format_; }
  const fs::path& path() const { return path_; }
  const fs::path& config_path() const { return config_path_; }
  const Qwen3Config& config() const { return config_; }
  const nlohmann::json& config_json() const { return config_json_; }  // config.json as read
  // Directory holding tokenizer.json, when there is one.
  const std::optional<fs::path>& tokenizer_dir() const { return tokenizer_dir_; }
  // Directory of the model's files (the model directory, or the .dat file's directory).
  const fs::path& directory() const { return directory_; }
  // Files holding the weights.
  virtual std::vector<fs::path> data_files() const = 0;

  // Expected weights in canonical order, then other tensors in file order.
  const std::vector<WeightInfo>& weights() const { return weights_; }
  const WeightInfo* find(std::string_view name) const;
  const WeightInfo& at(std::string_view name) const;  // Error naming the model when absent

  // Makes this a model of the first `layers` decoder blocks (1 <= layers <= config().num_hidden_layers, an Error
  // otherwise): config() and config_json() say so ("layer_types" cut too), the later blocks' weights are dropped
  // from weights(). For quick smoke tests of a large model (train --max-layers).
  void keep_first_layers(int layers);

  virtual ModelWeight load(const std::string& name) const = 0;
  // Done with a weight: release its mapped pages (keeps RSS low when streaming over a large model).
  virtual void release(const std::string& name) const = 0;

 protected:
  // Sets weights_ from `found` (any order): canonical order first, checks presence and shapes.
  void finalize_weights(std::vector<WeightInfo> found);

  ModelFormat format_ = ModelFormat::HfSafetensors;
  fs::path path_, config_path_, directory_;
  Qwen3Config config_;
  nlohmann::json config_json_;
  std::optional<fs::path> tokenizer_dir_;
  std::vector<WeightInfo> weights_;
  std::unordered_map<std::string, size_t> index_;
};

std::unique_ptr<ModelFiles> open_model(const fs::path& path, const OpenModelOptions& options = {});

// The tokenizer and chat-template files a model directory may carry beside its weights (tokenizer.json,
// tokenizer_config.json, special_tokens_map.json, vocab.json, merges.txt, chat_template.jinja): those present in
// `dir`. quantize, export and a training run's source-model/ copy carry them along.
std::vector<fs::path> tokenizer_side_files(const fs::path& dir);

}  // namespace nvfp4lm
