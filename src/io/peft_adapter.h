// A LoRA adapter as Hugging Face PEFT saves one (PeftModel.save_pretrained), so PEFT (PeftModel.from_pretrained) and
// vLLM (--lora-modules NAME=DIR) load it over the base model:
//   DIR/adapter_config.json        LoraConfig.to_dict(): peft_type "LORA", task_type "CAUSAL_LM", r, lora_alpha,
//                                  target_modules, lora_dropout, bias "none", fan_in_fan_out false, ... (the fields
//                                  PEFT writes, with its defaults for what nvfp4lm does not use)
//   DIR/adapter_model.safetensors  "base_model.model.<module>.lora_A.weight" [r, in] and ".lora_B.weight" [out, r]
//                                  (PEFT's get_peft_model_state_dict names: the adapter name "default" removed), F32,
//                                  metadata {"format": "pt"}
//   DIR/README.md                  the model card (PEFT's save_pretrained writes one too): YAML front matter with
//                                  base_model and library_name "peft", then what the adapter is and which base it
//                                  needs (peft_adapter_model_card); written when the config carries one
// The directory appears complete or not at all (core/publish.h). read_peft_adapter reads such a directory back (ours or
// one PEFT wrote) for inference over a base model (model/lora_runtime.h).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/tensor.h"

namespace nvfp4lm {

inline constexpr const char* kPeftConfigFileName = "adapter_config.json";
inline constexpr const char* kPeftWeightsFileName = "adapter_model.safetensors";

struct PeftLoraConfig {
  std::string base_model;                               // base_model_name_or_path
  int rank = 0;                                         // r
  double alpha = 0;                                     // lora_alpha
  double dropout = 0;                                   // lora_dropout
  std::vector<std::string> target_modules;              // "q_proj", ...
  std::optional<std::vector<int>> layers_to_transform;  // only these decoder layers carry adapters
  std::string model_card;                               // README.md; none written when empty
};

// README.md for an adapter of `config` (base_model, rank, alpha, targets) trained by nvfp4lm. `base_note`: which base
// the adapter's function needs, in words (for a LoRA run over a dense base with QAT: its NVFP4 quantization); "" when
// it is the base named.
std::string peft_adapter_model_card(const PeftLoraConfig& config, const std::string& base_note);

// adapter_config.json's object.
nlohmann::json peft_lora_config_json(const PeftLoraConfig& config);

// What serving an adapter of rank `rank` with vLLM takes, in words ("" when its defaults do): vLLM's max_lora_rank is
// one of 1, 8, 16, 32, 64, 128, 256, 320, 512, default 16 (vllm/config/lora.py: `MaxLoRARanks = Literal[...]`,
// `max_lora_rank: MaxLoRARanks = 16`), so a rank above 16 needs `--max-lora-rank` of the next of those, and one above
// 512 cannot be served by vLLM at all (PEFT and nvfp4lm load it; a merge serves anywhere).
std::string vllm_lora_rank_note(int rank);

struct PeftTensor {
  std::string name;  // "base_model.model.<module>.lora_A.weight"
  Tensor tensor;
};

// Writes DIR (replacing an existing adapter or model directory only with overwrite). `adapters`: PEFT-named A and B
// tensors on any device, F32.
void write_peft_adapter(const fs::path& dir, const PeftLoraConfig& config, std::span<const PeftTensor> adapters,
                        bool overwrite);

// An adapter directory read back: its config and its tensors (F32 CPU copies, whatever float dtype the file holds).
struct PeftAdapter {
  fs::path dir;
  PeftLoraConfig config;
  bool use_rslora = false;  // PEFT's rank-stabilised scale alpha / √r instead of alpha / r
  std::map<std::string, Tensor> tensors;
  // The factor of B·A: lora_alpha / r, or lora_alpha / √r with use_rslora.
  double scale() const;
};

// Reads DIR/adapter_config.json and DIR/adapter_model.safetensors. Error naming the file and the field for what a plain
// LoRA over the linears cannot express: peft_type other than "LORA", use_dora, bias other than "none",
// fan_in_fan_out, rank_pattern / alpha_pattern, modules_to_save, target_modules as a regular expression, a rank or
// alpha out of range, non-float or non-finite tensors, only a pickled adapter_model.bin (convert it with PEFT).
PeftAdapter read_peft_adapter(const fs::path& dir);

}  // namespace nvfp4lm
