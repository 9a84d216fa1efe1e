// Writing a PEFT LoRA adapter directory (see peft_adapter.h).
#include "io/peft_adapter.h"

#include <fmt/ranges.h>

#include <cmath>

#include "core/error.h"
#include "core/json_text.h"
#include "core/publish.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"

namespace nvfp4lm {

nlohmann::json peft_lora_config_json(const PeftLoraConfig& config) {
  NVFP4LM_ASSERT(config.rank > 0 && !config.target_modules.empty(), "a PEFT LoRA config with rank {} and {} targets",
                 config.rank, config.target_modules.size());
  // The keys of peft.LoraConfig.to_dict() that a plain LoRA uses, with PEFT's defaults where nvfp4lm has no such
  // setting; a loader fills any key it knows and this file lacks with its default.
  nlohmann::json json = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", config.base_model},
      {"revision", nullptr},
      {"inference_mode", true},
      {"r", config.rank},
      {"lora_alpha", config.alpha},
      {"lora_dropout", config.dropout},
      {"target_modules", config.target_modules},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"use_rslora", false},
      {"use_dora", false},
      {"init_lora_weights", true},
      {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr},
      {"layers_pattern", nullptr},
      {"rank_pattern", nlohmann::json::object()},
      {"alpha_pattern", nlohmann::json::object()},
      {"layer_replication", nullptr},
  };
  if (config.layers_to_transform) {
    json["layers_to_transform"] = *config.layers_to_transform;
    json["layers_pattern"] = "layers";
  }
  return json;
}

std::string vllm_lora_rank_note(int rank) {
  constexpr int kVllmMaxLoraRanks[] = {1, 8, 16, 32, 64, 128, 256, 320, 512};
  constexpr int kVllmDefaultMaxLoraRank = 16;
  if (rank <= kVllmDefaultMaxLoraRank) return {};
  for (const int allowed : kVllmMaxLoraRanks)
    if (rank <= allowed)
      return fmt::format("vLLM serves a rank-{} adapter with --max-lora-rank {} (its default, 16, refuses it)", rank,
                         allowed);
  return fmt::format(
      "vLLM cannot serve a rank-{} adapter (its --max-lora-rank stops at 512); PEFT and nvfp4lm load it, and `nvfp4lm "
      "export RUN OUT --merge-lora` makes a model any engine serves",
      rank);
}

void write_peft_adapter(const fs::path& dir, const PeftLoraConfig& config, std::span<const PeftTensor> adapters,
                        bool overwrite) {
  NVFP4LM_CHECK(!adapters.empty(), "no adapter tensors to write to {}", dir.string());
  const std::string config_text = peft_lora_config_json(config).dump(2) + "\n";
  StagedDirectory staged(dir);
  std::vector<SafetensorsEntrySpec> entries;
  for (const PeftTensor& t : adapters) {
    NVFP4LM_ASSERT(t.tensor.dtype() == DType::F32 && t.tensor.rank() == 2, "adapter tensor {} is {}", t.name,
                   t.tensor.str());
    entries.push_back({t.name, DType::F32, t.tensor.shape()});
  }
  {
    SafetensorsWriter writer(staged.path() / kPeftWeightsFileName, entries);
    for (const PeftTensor& t : adapters) writer.write(t.name, t.tensor.contiguous().to(Device::cpu()));
    writer.finish();
  }
  write_file_atomic(staged.path() / kPeftConfigFileName, config_text, false);
  if (!config.model_card.empty()) write_file_atomic(staged.path() / "README.md", config.model_card, false);
  staged.publish(overwrite, "the adapter output");
}

std::string peft_adapter_model_card(const PeftLoraConfig& config, const std::string& base_note) {
  // The front matter's keys are the ones PEFT's model card sets (library_name, base_model): the Hub and PEFT read them.
  std::string card = fmt::format(
      "---\nbase_model: {}\nlibrary_name: peft\ntags:\n- lora\n- nvfp4lm\n---\n\n# LoRA adapter\n\n"
      "Trained by nvfp4lm {}: rank {}, alpha {}, over {}{}.\n\n",
      nlohmann::json(config.base_model).dump(), NVFP4LM_VERSION, config.rank, config.alpha,
      fmt::join(config.target_modules, ", "),
      config.layers_to_transform ? fmt::format(" of layers {}", fmt::join(*config.layers_to_transform, ", "))
                                 : std::string());
  card += "## Base model\n\n";
  card +=
      base_note.empty() ? fmt::format("The adapter applies to `{}` as it is.\n", config.base_model) : base_note + "\n";
  card +=
      "\n## Use\n\n```\nnvfp4lm generate --model BASE --lora ADAPTER --prompt \"...\"\n"
      "nvfp4lm eval --model BASE --lora ADAPTER --data FILE     # its loss on your data\n"
      "vllm serve BASE --enable-lora --lora-modules NAME=ADAPTER\n```\n";
  if (const std::string note = vllm_lora_rank_note(config.rank); !note.empty()) card += "\n" + note + ".\n";
  return card;
}

double PeftAdapter::scale() const {
  const double rank = static_cast<double>(config.rank);
  return config.alpha / (use_rslora ? std::sqrt(rank) : rank);
}

namespace {

// A key of adapter_config.json that must hold PEFT's plain-LoRA value (absent = the default, which is that value).
void expect_plain(const nlohmann::json& json, const char* key, const nlohmann::json& plain, const fs::path& file,
                  const char* why) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null() || *it == plain) return;
  throw Error(fmt::format("{}: \"{}\" is {}; nvfp4lm applies plain LoRA adapters only ({})", file.string(), key,
                          json_excerpt(*it), why));
}

std::vector<std::string> target_modules(const nlohmann::json& json, const fs::path& file) {
  const auto it = json.find("target_modules");
  NVFP4LM_CHECK(it != json.end() && !it->is_null(), "{}: no \"target_modules\"", file.string());
  if (it->is_string()) {
    // PEFT's shorthand for every linear but the output layer (kept as the one entry: model/lora_runtime.cpp expands
    // it); any other string is a regular expression over module names, which would need PEFT's matcher to interpret.
    NVFP4LM_CHECK(*it == "all-linear",
                  "{}: \"target_modules\" is the regular expression {}; nvfp4lm reads a list of module names (q_proj, "
                  "k_proj, ...) or \"all-linear\"",
                  file.string(), json_excerpt(*it));
    return {"all-linear"};
  }
  NVFP4LM_CHECK(it->is_array(), "{}: \"target_modules\" is {}, expected a list of module names", file.string(),
                json_excerpt(*it));
  std::vector<std::string> modules;
  for (const nlohmann::json& module : *it) {
    NVFP4LM_CHECK(module.is_string(), "{}: \"target_modules\" holds {}, expected module names", file.string(),
                  json_excerpt(module));
    modules.push_back(module.get<std::string>());
  }
  return modules;
}

std::optional<std::vector<int>> layers_to_transform(const nlohmann::json& json, const fs::path& file) {
  const auto it = json.find("layers_to_transform");
  if (it == json.end() || it->is_null()) return std::nullopt;
  std::vector<int> layers;
  const auto add = [&](const nlohmann::json& layer) {
    NVFP4LM_CHECK(layer.is_number_integer() && layer.get<int64_t>() >= 0 && layer.get<int64_t>() < (1 << 20),
                  "{}: \"layers_to_transform\" holds {}, expected layer indices", file.string(), json_excerpt(layer));
    layers.push_back(layer.get<int>());
  };
  if (it->is_array()) {
    for (const nlohmann::json& layer : *it) add(layer);
  } else {
    add(*it);
  }
  return layers;
}

}  // namespace

PeftAdapter read_peft_adapter(const fs::path& dir) {
  const fs::path config_file = dir / kPeftConfigFileName, weights_file = dir / kPeftWeightsFileName;
  NVFP4LM_CHECK(fs::is_directory(dir), "LoRA adapter {}: not a directory (expected {} and {} in it)", dir.string(),
                kPeftConfigFileName, kPeftWeightsFileName);
  NVFP4LM_CHECK(fs::exists(config_file), "LoRA adapter {}: no {} (a PEFT adapter directory has one)", dir.string(),
                kPeftConfigFileName);
  NVFP4LM_CHECK(fs::exists(weights_file) || !fs::exists(dir / "adapter_model.bin"),
                "LoRA adapter {}: only a pickled adapter_model.bin, which nvfp4lm does not read (save it again with "
                "PEFT's save_pretrained(..., safe_serialization=True) for {})",
                dir.string(), kPeftWeightsFileName);
  NVFP4LM_CHECK(fs::exists(weights_file), "LoRA adapter {}: no {}", dir.string(), kPeftWeightsFileName);

  const nlohmann::json json = read_json_file(config_file);
  NVFP4LM_CHECK(json.is_object(), "{}: not a JSON object", config_file.string());
  const std::string where = config_file.string();
  PeftAdapter adapter;
  adapter.dir = dir;
  const auto peft_type = json_field_or<std::string>(json, "peft_type", "", where);
  NVFP4LM_CHECK(peft_type == "LORA", "{}: \"peft_type\" is \"{}\"; nvfp4lm applies LoRA adapters (\"LORA\") only",
                where, peft_type);
  // PEFT writes null when the config was made without a base model's name (LoraConfig's default).
  const auto base_model = json.find("base_model_name_or_path");
  if (base_model == json.end() || !base_model->is_null())
    adapter.config.base_model = json_field_or<std::string>(json, "base_model_name_or_path", "", where);
  adapter.config.rank = json_field_or<int>(json, "r", 8, where);  // PEFT's default r
  NVFP4LM_CHECK(adapter.config.rank >= 1 && adapter.config.rank <= 4096, "{}: \"r\" is {}, expected 1..4096", where,
                adapter.config.rank);
  adapter.config.alpha = json_field_or<double>(json, "lora_alpha", 8.0, where);  // PEFT's default lora_alpha
  NVFP4LM_CHECK(std::isfinite(adapter.config.alpha) && adapter.config.alpha != 0,
                "{}: \"lora_alpha\" is {}, expected a finite non-zero number", where, adapter.config.alpha);
  adapter.config.dropout = json_field_or<double>(json, "lora_dropout", 0.0, where);
  adapter.config.target_modules = target_modules(json, config_file);
  adapter.config.layers_to_transform = layers_to_transform(json, config_file);
  adapter.use_rslora = json_field_or<bool>(json, "use_rslora", false, where);
  expect_plain(json, "use_dora", false, config_file, "DoRA rescales the merged weight's columns");
  expect_plain(json, "bias", "none", config_file, "trained biases would need bias tensors Qwen3 has not");
  expect_plain(json, "fan_in_fan_out", false, config_file, "Qwen3's linears store [out, in]");
  expect_plain(json, "rank_pattern", nlohmann::json::object(), config_file, "one rank for every module");
  expect_plain(json, "alpha_pattern", nlohmann::json::object(), config_file, "one alpha for every module");
  expect_plain(json, "modules_to_save", nlohmann::json::array(), config_file,
               "fully trained copies of modules are not adapters");

  const auto file = SafetensorsFile::open(weights_file);
  for (const SafetensorsEntry& entry : file->entries()) {
    NVFP4LM_CHECK(entry.dtype == DType::F32 || entry.dtype == DType::BF16 || entry.dtype == DType::F16,
                  "{}: tensor {} is {}, expected F32, BF16 or F16", weights_file.string(), entry.name,
                  dtype_name(entry.dtype));
    const std::vector<float> values = to_float_vector(file->read(entry));
    for (float v : values)
      NVFP4LM_CHECK(std::isfinite(v), "{}: tensor {} holds a non-finite value ({})", weights_file.string(), entry.name,
                    v);
    adapter.tensors.emplace(entry.name, Tensor::from_floats(values, entry.shape));
  }
  return adapter;
}

}  // namespace nvfp4lm
