// NVFP4 in NVIDIA ModelOpt's "unified HF" checkpoint layout, the one vLLM (quantization "modelopt_fp4") and
// TensorRT-LLM load. For a quantized linear layer "<prefix>.weight":
//   <prefix>.weight          U8      [out, in/2]   two E2M1 codes per byte, element 2i in the low nibble
//   <prefix>.weight_scale    F8_E4M3 [out, in/16]  one scale per 16 consecutive inputs
//   <prefix>.weight_scale_2  F32     []            the tensor scale, a multiplier:
//                                                  value = code * weight_scale * weight_scale_2
//   <prefix>.input_scale     F32     []            only in a W4A4 export (quant_algo "NVFP4"): the activation tensor
//                                                  scale engines with 4-bit activations use, amax / (6 * 448) of the
//                                                  linear's input over calibration text (io/activation_calibration.h)
// Which of the two an export is follows from whether activation ranges were measured:
//   - calibrated: quant_algo "NVFP4" (W4A4), every quantized linear carries its measured input_scale;
//   - not: quant_algo "W4A16_NVFP4" (weight-only, activations stay BF16), no input_scale at all. This is what
//     ModelOpt's own exporter writes for NVFP4 weights whose input quantizer is disabled
//     (QUANTIZATION_W4A16_NVFP4 in modelopt/torch/export), and vLLM reads it as ModelOptNvFp4Config with
//     quant_method W4A16_NVFP4. There is no placeholder an engine could mistake for a measured scale: an engine
//     that does not know W4A16_NVFP4 refuses the checkpoint instead of quantizing activations with a made-up scale.
// Everything else (embeddings, norms, lm_head unless quantized) is stored as in a plain HF checkpoint.
// hf_quant_config.json: {"producer": {"name": "nvfp4lm", "version": ...}, "quantization": {"quant_algo": ...,
// "kv_cache_quant_algo": null, "group_size": 16, "exclude_modules": [...]}, "nvfp4lm": {...}}. The "nvfp4lm" object
// is ours: {"input_scale": "calibrated", "calibration": {"source": ..., "tokens": N}} or {"input_scale": "none",
// "note": ...}. Engines read only "quantization" (vLLM's ModelOptNvFp4Config; TensorRT-LLM merges "quantization"
// into its own config, so nothing may be added there) and ignore other keys. config.json carries the same as
// "quantization_config" in the form ModelOpt's exporter writes (convert_hf_quant_config_format: config_groups with
// input_activations null for W4A16, ignore, quant_algo, producer, quant_method "modelopt").
// Reading accepts both algorithms, and older nvfp4lm exports (quant_algo "NVFP4" with 1.0 placeholder input scales).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/files.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

// quant_algo of a W4A4 export (calibrated input scales) and of a weight-only one.
inline constexpr std::string_view kModeloptW4A4Algo = "NVFP4";
inline constexpr std::string_view kModeloptW4A16Algo = "W4A16_NVFP4";

// The quant_algo an export writes: W4A4 only with measured activation scales.
std::string_view modelopt_quant_algo(bool calibrated);

struct ModeloptQuantConfig {
  std::string producer_name;
  std::string producer_version;
  std::string quant_algo;  // "NVFP4" or "W4A16_NVFP4"
  int64_t group_size = 16;
  std::optional<std::string> kv_cache_quant_algo;
  std::vector<std::string> exclude_modules;
};

// Whether nvfp4lm reads checkpoints of this quant_algo (NVFP4, W4A16_NVFP4).
bool modelopt_quant_algo_supported(std::string_view quant_algo);
// Reads hf_quant_config.json; Error unless quant_algo is NVFP4 or W4A16_NVFP4 with group_size 16.
ModeloptQuantConfig load_hf_quant_config(const fs::path& path);
// calibration_note: the "nvfp4lm" object above (modelopt_calibration_note); quant_algo from modelopt_quant_algo.
nlohmann::json hf_quant_config_json(const std::vector<std::string>& exclude_modules, std::string_view quant_algo,
                                    const nlohmann::json& calibration_note);
// {"input_scale": "calibrated", "calibration": {"source", "tokens"}} when `calibrated`, else the weight-only note.
nlohmann::json modelopt_calibration_note(bool calibrated, const std::string& source, int64_t tokens);
// The one line a weight-only (uncalibrated) ModelOpt export logs: what it is and how to get W4A4.
std::string weight_only_export_notice(const std::string& out);
// The warning an export with a quantized lm_head logs: which engines cannot load it.
std::string quantized_lm_head_warning(const std::string& out);
// The same without the path: hf_quant_config.json's "nvfp4lm" object holds it as "lm_head".
std::string quantized_lm_head_note();
// Whether a ModelOpt directory's hf_quant_config.json says its input scales are calibrated (false without the note).
bool modelopt_input_scales_calibrated(const fs::path& model_dir);
// The "quantization_config" block for config.json.
nlohmann::json modelopt_quantization_config(const std::vector<std::string>& exclude_modules,
                                            std::string_view quant_algo);

// "<prefix>" of a linear's "<prefix>.weight" (asserts the suffix).
std::string linear_prefix_of(const std::string& weight_name);
// A rank-0 or one-element F32 tensor's value (ModelOpt's scalars, compressed-tensors' [1] scales); Error names the
// file and tensor.
float read_f32_scalar(const SafetensorsSet& set, const std::string& name);

struct ModeloptNames {
  std::string weight, weight_scale, weight_scale_2, input_scale;
};
// weight_name is the HF name of the linear weight ("....q_proj.weight").
ModeloptNames modelopt_names(const std::string& weight_name);

// Whether the set stores `weight_name` quantized (it has a weight_scale beside it).
bool modelopt_is_quantized(const SafetensorsSet& set, const std::string& weight_name);
// Reads one quantized weight (zero-copy views of codes and block scales) and validates dtypes, shapes, the
// tensor scale and the input scale (when present: W4A4 exports); Errors name the file and tensor.
Nvfp4Tensor read_modelopt_weight(const SafetensorsSet& set, const std::string& weight_name);
// The input_scale of a quantized weight (a W4A4 export: the activations' fixed tensor scale), 0 when it has none;
// Error when it is not finite and positive.
float read_modelopt_input_scale(const SafetensorsSet& set, const std::string& weight_name);
// Bytes the tensors of a quantized weight (three or four) take in the file.
uint64_t modelopt_weight_file_bytes(const SafetensorsSet& set, const std::string& weight_name);
void drop_modelopt_weight_pages(const SafetensorsSet& set, const std::string& weight_name);

// Writer side: declares the entries of a [rows, cols] quantized weight (weight, weight_scale, weight_scale_2, and
// input_scale when `with_input_scale`: W4A4), then writes them in that order.
void declare_modelopt_weight(std::vector<SafetensorsEntrySpec>& entries, const std::string& weight_name, int64_t rows,
                             int64_t cols, bool with_input_scale);
// input_scale: a measured scale, finite and positive (W4A4), or nullopt (weight-only: none is written). It must
// match what declare_modelopt_weight declared.
void write_modelopt_weight(SafetensorsWriter& writer, const std::string& weight_name, const Nvfp4Tensor& q,
                           std::optional<float> input_scale);
// Bytes the declared entries take.
uint64_t modelopt_weight_bytes(int64_t rows, int64_t cols, bool with_input_scale);

}  // namespace nvfp4lm
