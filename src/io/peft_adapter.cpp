// Writing a PEFT LoRA adapter directory (see peft_adapter.h).
#include "io/peft_adapter.h"

#include "core/error.h"
#include "core/publish.h"
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
  staged.publish(overwrite, "the adapter output");
}

}  // namespace nvfp4lm
