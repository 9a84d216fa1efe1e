// open_model(): format detection and the checks common to every format. The readers themselves are in
// model_files_safetensors.cpp (HF and ModelOpt) and model_files_dat.cpp.
#include "io/model_files.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/json_text.h"
#include "core/logging.h"
#include "io/compressed_tensors.h"
#include "io/gguf_reader.h"
#include "io/model_files_impl.h"
#include "io/modelopt.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

bool has_extension(const fs::path& path, std::string_view extension) { return path.extension() == extension; }

std::vector<std::string> directory_listing(const fs::path& dir, std::string_view extension) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec))
    if (item.is_regular_file(ec) && has_extension(item.path(), extension)) names.push_back(item.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

bool path_exists(const fs::path& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

// quantization_config in config.json: "modelopt" (with NVFP4) and "compressed-tensors" (with the NVFP4 schemes)
// are ours to read; anything else is not. Which of the two, or nullopt for an unquantized config.
std::optional<ModelFormat> quantized_format_in_config(const fs::path& config_path) {
  const json config = read_json_file(config_path);
  if (!config.is_object() || !config.contains("quantization_config") || config["quantization_config"].is_null())
    return std::nullopt;
  const json& q = config["quantization_config"];
  const std::string method = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()
                                 ? q["quant_method"].get<std::string>()
                                 : std::string("(unnamed)");
  if (method == kCompressedTensorsMethod) {
    parse_compressed_tensors_config(q, config_path.string());  // Errors on schemes nvfp4lm cannot run
    return ModelFormat::CompressedTensorsNvfp4;
  }
  NVFP4LM_CHECK(
      method == "modelopt",
      "{}: quantization_config.quant_method '{}' is not supported; nvfp4lm reads unquantized (BF16/FP16/FP32), "
      "ModelOpt NVFP4 and compressed-tensors NVFP4 checkpoints",
      config_path.string(), method);
  const std::string algo = q.contains("quant_algo") && q["quant_algo"].is_string() ? q["quant_algo"].get<std::string>()
                                                                                   : std::string("(none)");
  NVFP4LM_CHECK(modelopt_quant_algo_supported(algo),
                "{}: ModelOpt quant_algo '{}' is not supported (only NVFP4 and W4A16_NVFP4)", config_path.string(),
                algo);
  return ModelFormat::ModeloptNvfp4;
}

std::optional<fs::path> tokenizer_in(const fs::path& dir, const OpenModelOptions& options) {
  if (options.tokenizer_dir) {
    NVFP4LM_CHECK(path_exists(*options.tokenizer_dir / "tokenizer.json"),
                  "tokenizer directory {} has no tokenizer.json", options.tokenizer_dir->string());
    return *options.tokenizer_dir;
  }
  if (path_exists(dir / "tokenizer.json")) return dir;
  return std::nullopt;
}

fs::path config_for(const fs::path& dir, const OpenModelOptions& options, const std::string& what) {
  if (options.config_path) {
    NVFP4LM_CHECK(path_exists(*options.config_path), "config file {} does not exist", options.config_path->string());
    return *options.config_path;
  }
  const fs::path config = dir / "config.json";
  NVFP4LM_CHECK(path_exists(config), "{}: no config.json in {}; {} needs one (or pass --config FILE)", what,
                dir.string(), what);
  return config;
}

detail::ModelLocation locate_dat(const fs::path& dat_path, const fs::path& given, const OpenModelOptions& options) {
  detail::ModelLocation location;
  location.format = ModelFormat::Dat;
  location.path = given;
  location.dat_path = dat_path;
  location.directory = dat_path.parent_path().empty() ? fs::path(".") : dat_path.parent_path();
  location.config_path = config_for(location.directory, options, "the .dat model " + dat_path.string());
  location.tokenizer_dir = tokenizer_in(location.directory, options);
  return location;
}

detail::ModelLocation locate(const fs::path& path, const OpenModelOptions& options) {
  std::error_code ec;
  NVFP4LM_CHECK(fs::exists(path, ec), "model path {} does not exist", path.string());
  if (fs::is_regular_file(path, ec)) {
    if (has_extension(path, ".dat")) return locate_dat(path, path, options);
    if (has_extension(path, ".gguf") || starts_with_gguf_magic(path)) {
      NVFP4LM_CHECK(!options.config_path, "{} is a GGUF file, which carries its configuration: drop --config",
                    path.string());
      detail::ModelLocation location;
      location.format = ModelFormat::Gguf;
      location.path = path;
      location.directory = path.parent_path().empty() ? fs::path(".") : path.parent_path();
      location.config_path = path;
      location.tokenizer_dir = tokenizer_in(location.directory, options);
      return location;
    }
    NVFP4LM_CHECK(!has_extension(path, ".safetensors"),
                  "{} is a safetensors file; pass the model directory that holds it and config.json", path.string());
    NVFP4LM_FAIL("{} is not a model: expected a Hugging Face / ModelOpt model directory, a .dat file or a GGUF file",
                 path.string());
  }
  NVFP4LM_CHECK(fs::is_directory(path, ec), "{} is neither a file nor a directory", path.string());

  const bool has_single = path_exists(path / "model.safetensors");
  const bool has_index = path_exists(path / "model.safetensors.index.json");
  const auto dat_files = directory_listing(path, ".dat");
  const bool has_safetensors = has_single || has_index;
  NVFP4LM_CHECK(!(has_safetensors && !dat_files.empty()),
                "{} holds both safetensors weights and .dat files ({}); name the .dat file to use it, or remove one",
                path.string(), fmt::join(dat_files, ", "));
  if (!has_safetensors && !dat_files.empty()) {
    NVFP4LM_CHECK(dat_files.size() == 1, "{} holds several .dat files ({}); name the one to use", path.string(),
                  fmt::join(dat_files, ", "));
    return locate_dat(path / dat_files[0], path, options);
  }
  if (!has_safetensors) {
    const auto others = directory_listing(path, ".safetensors");
    NVFP4LM_FAIL(
        "{}: found no model weights (expected model.safetensors, model.safetensors.index.json or one .dat "
        "file){}",
        path.string(),
        others.empty() ? std::string() : fmt::format("; found {} without an index", fmt::join(others, ", ")));
  }
  detail::ModelLocation location;
  location.path = path;
  location.directory = path;
  location.config_path = config_for(path, options, "a Hugging Face model directory");
  if (path_exists(path / "hf_quant_config.json")) {
    const json config = read_json_file(location.config_path);
    NVFP4LM_CHECK(
        json_field_or(json_field_or(config, "quantization_config", json::object(), location.config_path.string()),
                      "quant_method", std::string(), location.config_path.string()) != kCompressedTensorsMethod,
        "{} has both hf_quant_config.json (ModelOpt) and a compressed-tensors quantization_config in "
        "config.json; remove the one that does not describe its weights",
        path.string());
    location.format = ModelFormat::ModeloptNvfp4;
  } else {
    location.format = quantized_format_in_config(location.config_path).value_or(ModelFormat::HfSafetensors);
  }
  location.tokenizer_dir = tokenizer_in(path, options);
  return location;
}

}  // namespace

std::string_view model_format_name(ModelFormat format) {
  switch (format) {
    case ModelFormat::HfSafetensors:
      return "hf-safetensors";
    case ModelFormat::ModeloptNvfp4:
      return "modelopt-nvfp4";
    case ModelFormat::CompressedTensorsNvfp4:
      return "compressed-tensors-nvfp4";
    case ModelFormat::Dat:
      return "dat";
    case ModelFormat::Gguf:
      return "gguf";
  }
  return "?";
}

const WeightInfo* ModelFiles::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &weights_[it->second];
}

const WeightInfo& ModelFiles::at(std::string_view name) const {
  const WeightInfo* info = find(name);
  NVFP4LM_CHECK(info != nullptr, "{}: no weight '{}'", path_.string(), name);
  return *info;
}

void ModelFiles::finalize_weights(std::vector<WeightInfo> found) {
  const std::string model = path_.string();
  std::unordered_map<std::string, WeightInfo> by_name;
  std::vector<std::string> file_order;
  for (auto& info : found) {
    NVFP4LM_ASSERT(!by_name.count(info.name), "weight {} listed twice", info.name);
    file_order.push_back(info.name);
    by_name.emplace(info.name, std::move(info));
  }
  if (config_.tie_word_embeddings && by_name.count(std::string(kLmHeadWeightName))) {
    log::warn("{}: lm_head.weight is present but config.json ties it to the embeddings; it is ignored", model);
    by_name.erase(std::string(kLmHeadWeightName));
  }
  weights_.clear();
  for (const auto& expected : qwen3_expected_weights(config_)) {
    auto it = by_name.find(expected.name);
    NVFP4LM_CHECK(it != by_name.end(), "{}: weight '{}' ({} for this config) is missing", model, expected.name,
                  expected.shape.str());
    WeightInfo& info = it->second;
    NVFP4LM_CHECK(info.shape == expected.shape, "{}: weight '{}' has shape {}, but config.json ({}) needs {}", model,
                  info.name, info.shape.str(), config_path_.string(), expected.shape.str());
    NVFP4LM_CHECK(info.nvfp4 || dtype_is_float(info.dtype),
                  "{}: weight '{}' is stored as {}; expected F32, BF16, F16{}", model, info.name,
                  dtype_name(info.dtype),
                  format_ == ModelFormat::ModeloptNvfp4            ? " or NVFP4 (weight + weight_scale)"
                  : format_ == ModelFormat::CompressedTensorsNvfp4 ? " or NVFP4 (weight_packed + weight_scale)"
                                                                   : "");
    info.kind = expected.kind;
    weights_.push_back(std::move(info));
    by_name.erase(it);
  }
  std::vector<std::string> extras;
  for (const auto& name : file_order) {
    auto it = by_name.find(name);
    if (it == by_name.end()) continue;
    it->second.kind = std::nullopt;
    extras.push_back(name);
    weights_.push_back(std::move(it->second));
  }
  if (!extras.empty())
    log::warn("{}: {} tensor(s) are not part of the Qwen3 layout of its config and are ignored (first: {})", model,
              extras.size(), extras.front());
  index_.clear();
  for (size_t i = 0; i < weights_.size(); ++i) index_[weights_[i].name] = i;
}

void ModelFiles::keep_first_layers(int layers) {
  const int all = config_.num_hidden_layers;
  NVFP4LM_CHECK(layers >= 1 && layers <= all, "{}: cannot keep the first {} layers of a model with {} (choose 1..{})",
                path_.string(), layers, all, all);
  if (layers == all) return;
  std::unordered_map<std::string, int> layer_of;
  for (const ExpectedWeight& expected : qwen3_expected_weights(config_)) layer_of[expected.name] = expected.layer;
  std::erase_if(weights_, [&](const WeightInfo& info) {
    const auto it = layer_of.find(info.name);
    return it != layer_of.end() && it->second >= layers;
  });
  index_.clear();
  for (size_t i = 0; i < weights_.size(); ++i) index_[weights_[i].name] = i;
  config_.num_hidden_layers = layers;
  config_json_["num_hidden_layers"] = layers;
  if (config_json_.contains("layer_types") && config_json_["layer_types"].is_array() &&
      config_json_["layer_types"].size() > static_cast<size_t>(layers))
    config_json_["layer_types"].erase(config_json_["layer_types"].begin() + layers, config_json_["layer_types"].end());
  if (config_json_.contains("max_window_layers") && config_json_["max_window_layers"].is_number_integer() &&
      config_json_["max_window_layers"].get<int64_t>() > layers)
    config_json_["max_window_layers"] = layers;
}

namespace detail {

ModelFilesBase::ModelFilesBase(const ModelLocation& location) {
  format_ = location.format;
  path_ = location.path;
  directory_ = location.directory;
  config_path_ = location.config_path;
  tokenizer_dir_ = location.tokenizer_dir;
  config_json_ = read_json_file(config_path_);
  config_ = parse_qwen3_config(config_json_, config_path_.string());
}

}  // namespace detail

std::unique_ptr<ModelFiles> open_model(const fs::path& path, const OpenModelOptions& options) {
  const detail::ModelLocation location = locate(path, options);
  if (location.format == ModelFormat::Dat) return detail::open_dat_model(location);
  if (location.format == ModelFormat::Gguf) return detail::open_gguf_model(location);
  return detail::open_safetensors_model(location);
}

std::vector<fs::path> tokenizer_side_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                           "merges.txt", "chat_template.jinja"}) {
    std::error_code ec;
    if (fs::is_regular_file(dir / name, ec)) files.push_back(dir / name);
  }
  return files;
}

}  // namespace nvfp4lm
