// NVFP4 in the compressed-tensors layout ("nvfp4-pack-quantized"), the one llm-compressor writes and vLLM loads
// through CompressedTensorsW4A4Fp4 / CompressedTensorsW4A16Fp4 (transformers through its compressed-tensors
// quantizer). For a quantized linear "<prefix>" (nvfp4lm still names the weight "<prefix>.weight"):
//   <prefix>.weight_packed        U8      [out, in/2]   two E2M1 codes per byte, element 2i in the low nibble
//                                                       (compressors/nvfp4/helpers.py pack_fp4_to_uint8)
//   <prefix>.weight_scale         F8_E4M3 [out, in/16]  one scale per 16 consecutive inputs
//   <prefix>.weight_global_scale  F32     [1]           a DIVISOR: value = code * weight_scale / weight_global_scale
//                                                       (forward_helpers.py _dequantize: scale / global_scale)
//   <prefix>.input_global_scale   F32     [1]           W4A4 only: the activations' divisor, 448 * 6 / amax
// compressed-tensors' own converter maps ModelOpt to it by reciprocals (entrypoints/convert/converters/
// modelopt_nvfp4.py: weight_global_scale = 1 / weight_scale_2, input_global_scale = 1 / input_scale), and vLLM
// reads it back the same way (compressed_tensors_w4a4_nvfp4.py process_weights_after_loading: 1.0 /
// weight_global_scale.max()), so nvfp4lm's tensor scale is 1.0f / weight_global_scale, as vLLM's is.
//
// Writing: the global scale written is a float g with 1.0f / g == the tensor scale, so the weight reads back (here
// and in vLLM) with exactly the tensor scale it was trained with. About one float in eight is no such reciprocal;
// those weights get the nearest g and read back with a tensor scale one float32 ulp away (said in the log; the
// ModelOpt format stores the multiplier itself and has no such loss).
// config.json "quantization_config" is what compressed-tensors' ModelCompressor.update_config writes
// (model_compressor.py) for the presets NVFP4 (W4A4, calibrated) and NVFP4A16 (weight-only) of quant_scheme.py.
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

inline constexpr std::string_view kCompressedTensorsMethod = "compressed-tensors";
inline constexpr std::string_view kCompressedTensorsNvfp4Format = "nvfp4-pack-quantized";
// The compressed-tensors version whose config layout is written (the "version" key of quantization_config).
inline constexpr std::string_view kCompressedTensorsVersion = "0.18.0";

struct CompressedTensorsNames {
  std::string weight_packed, weight_scale, weight_global_scale, input_global_scale;
};
// weight_name is nvfp4lm's name of the linear's weight ("....q_proj.weight").
CompressedTensorsNames compressed_tensors_names(const std::string& weight_name);

struct CompressedTensorsConfig {
  bool w4a4 = false;                // input_activations quantized (the NVFP4 preset), else NVFP4A16
  std::vector<std::string> ignore;  // modules left dense ("lm_head")
};
// Validates config.json's quantization_config (quant_method "compressed-tensors"): every config group must be
// the NVFP4 or NVFP4A16 scheme (4-bit float weights, tensor_group strategy, group_size 16, symmetric) in the
// nvfp4-pack-quantized format; anything else (int4, fp8, sparse, a mix of schemes) is an Error naming what was found.
CompressedTensorsConfig parse_compressed_tensors_config(const nlohmann::json& quantization_config,
                                                        const std::string& where);
// The quantization_config block for config.json (w4a4: the NVFP4 preset; else NVFP4A16).
nlohmann::json compressed_tensors_quantization_config(const std::vector<std::string>& ignore, bool w4a4);

// Whether the set stores `weight_name` quantized (its weight_packed is there).
bool compressed_tensors_is_quantized(const SafetensorsSet& set, const std::string& weight_name);
// Whether `name` is a packed weight or one of its scales (listed as part of the weight, not as a tensor).
bool compressed_tensors_part_of_quantized(const SafetensorsSet& set, const std::string& name);
// The weight name ("<prefix>.weight") of a "<prefix>.weight_packed".
std::optional<std::string> compressed_tensors_weight_of_packed(std::string_view name);
// One quantized weight: zero-copy codes and block scales, tensor scale 1 / weight_global_scale; Errors name the
// file and tensor.
Nvfp4Tensor read_compressed_tensors_weight(const SafetensorsSet& set, const std::string& weight_name);
// 1 / input_global_scale (nvfp4lm's input_scale, a multiplier), 0 when the weight has none (W4A16).
float read_compressed_tensors_input_scale(const SafetensorsSet& set, const std::string& weight_name);
uint64_t compressed_tensors_weight_file_bytes(const SafetensorsSet& set, const std::string& weight_name);
void drop_compressed_tensors_weight_pages(const SafetensorsSet& set, const std::string& weight_name);

// The weight_global_scale stored for a tensor scale: g with 1.0f / g == tensor_scale when one exists (a bfloat16
// g first, the kind llm-compressor's observers make, so its checkpoints write back byte for byte), else the float
// nearest 1 / tensor_scale.
float compressed_tensors_global_scale(float tensor_scale);

void declare_compressed_tensors_weight(std::vector<SafetensorsEntrySpec>& entries, const std::string& weight_name,
                                       int64_t rows, int64_t cols, bool with_input_scale);
// input_scale: nvfp4lm's multiplier (finite, positive), written as its reciprocal; nullopt for W4A16. Returns
// whether the tensor scale round-trips exactly (see compressed_tensors_global_scale).
bool write_compressed_tensors_weight(SafetensorsWriter& writer, const std::string& weight_name, const Nvfp4Tensor& q,
                                     std::optional<float> input_scale);

}  // namespace nvfp4lm
