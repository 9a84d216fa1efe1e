// NVFP4 in NVIDIA ModelOpt's "unified HF" checkpoint layout, the one vLLM (quantization "modelopt_fp4") and
// TensorRT-LLM load. For a quantized linear layer "<prefix>.weight":
//   <prefix>.weight          U8      [out, in/2]   two E2M1 codes per byte, element 2i in the low nibble
//   <prefix>.weight_scale    F8_E4M3 [out, in/16]  one scale per 16 consecutive inputs
//   <prefix>.weight_scale_2  F32     []            the tensor scale, a multiplier:
//                                                  value = code * weight_scale * weight_scale_2
//   <prefix>.input_scale     F32     []            activation tensor scale for engines that run 4-bit activations:
//                                                  amax / (6 * 448) of the linear's input over calibration text
//                                                  (io/activation_calibration.h), or 1.0, a placeholder, when the
//                                                  export was not calibrated (such an engine then flushes small
//                                                  activation blocks and clips above 6 * 448)
// Everything else (embeddings, norms, lm_head unless quantized) is stored as in a plain HF checkpoint.
// hf_quant_config.json: {"producer": {"name": "nvfp4lm", "version": ...}, "quantization": {"quant_algo":
// "NVFP4", "kv_cache_quant_algo": null, "group_size": 16, "exclude_modules": [...]}, "nvfp4lm": {...}}. The
// "nvfp4lm" object is ours: {"input_scale": "calibrated", "calibration": {"source": ..., "tokens": N}} or
// {"input_scale": "uncalibrated", "note": ...}. Engines read only "quantization" (vLLM's ModelOptNvFp4Config;
// TensorRT-LLM merges "quantization" into its own config, so nothing may be added there) and ignore other keys.
// config.json carries the same as "quantization_config" in the form ModelOpt's exporter writes
// (convert_hf_quant_config_format: config_groups, ignore, quant_algo, producer, quant_method "modelopt").
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/files.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

inline constexpr float kModeloptWeightOnlyInputScale = 1.0f;

struct ModeloptQuantConfig {
  std::string producer_name;
  std::string producer_version;
  std::string quant_algo;  // "NVFP4"
  int64_t group_size = 16;
  std::optional<std::string> kv_cache_quant_algo;
  std::vector<std::string> exclude_modules;
};

// Reads hf_quant_config.json; Error unless quant_algo is NVFP4 with group_size 16.
ModeloptQuantConfig load_hf_quant_config(const fs::path& path);
// calibration: the "nvfp4lm" object above (modelopt_calibration_note).
nlohmann::json hf_quant_config_json(const std::vector<std::string>& exclude_modules,
                                    const nlohmann::json& calibration_note);
// {"input_scale": "calibrated", "calibration": {"source", "tokens"}} when `calibrated`, else the uncalibrated note.
nlohmann::json modelopt_calibration_note(bool calibrated, const std::string& source, int64_t tokens);
// The one-line warning an uncalibrated ModelOpt export logs.
std::string uncalibrated_input_scale_warning(const std::string& out);
// Whether a ModelOpt directory's hf_quant_config.json says its input scales are calibrated (false without the note).
bool modelopt_input_scales_calibrated(const fs::path& model_dir);
// The "quantization_config" block for config.json.
nlohmann::json modelopt_quantization_config(const std::vector<std::string>& exclude_modules);

struct ModeloptNames {
  std::string weight, weight_scale, weight_scale_2, input_scale;
};
// weight_name is the HF name of the linear weight ("....q_proj.weight").
ModeloptNames modelopt_names(const std::string& weight_name);

// Whether the set stores `weight_name` quantized (it has a weight_scale beside it).
bool modelopt_is_quantized(const SafetensorsSet& set, const std::string& weight_name);
// Reads one quantized weight (zero-copy views of codes and block scales) and validates dtypes, shapes, the
// tensor scale and the input scale (when present); Errors name the file and tensor.
Nvfp4Tensor read_modelopt_weight(const SafetensorsSet& set, const std::string& weight_name);
// Bytes the four tensors of a quantized weight take in the file.
uint64_t modelopt_weight_file_bytes(const SafetensorsSet& set, const std::string& weight_name);
void drop_modelopt_weight_pages(const SafetensorsSet& set, const std::string& weight_name);

// Writer side: declares the four entries of a [rows, cols] quantized weight, then writes them in that order.
void declare_modelopt_weight(std::vector<SafetensorsEntrySpec>& entries, const std::string& weight_name, int64_t rows,
                             int64_t cols);
// input_scale: finite and positive (kModeloptWeightOnlyInputScale when uncalibrated).
void write_modelopt_weight(SafetensorsWriter& writer, const std::string& weight_name, const Nvfp4Tensor& q,
                           float input_scale);
// Bytes the four entries take.
uint64_t modelopt_weight_bytes(int64_t rows, int64_t cols);

}  // namespace nvfp4lm
