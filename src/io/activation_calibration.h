// Activation ranges of the NVFP4-quantized linears, measured by running a model on calibration text (ModelOpt's
// "max" calibration), and the `input_scale` the ModelOpt layout stores from them (io/modelopt.h).
//
// For each quantized weight (by its Hugging Face name, "model.layers.3.self_attn.q_proj.weight") the largest |x|
// of its input activations seen over the calibration tokens. The ModelOpt convention (NVFP4QTensor's activation
// scaling factor) is input_scale = amax / (6 * 448): the activation's global scale, so its E4M3 block scales cover
// the range an engine with 4-bit activations (vLLM, TensorRT-LLM on Blackwell) quantizes it with. Linears an engine
// fuses into one GEMM share one input_scale, like their weight scales (vLLM takes the max over a fused layer's
// input scales): q/k/v of a layer and gate/up (io/weight_names.h fused_scale_group) — they read the same input
// anyway, so their amax are equal; the rule takes the group's max all the same. An amax of 0 gives scale 1
// (nvfp4_tensor_scale), never a zero that an engine would divide by.
//
// Without calibration an export is weight-only (quant_algo W4A16_NVFP4) and has no input_scale (io/modelopt.h).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace nvfp4lm {

struct ActivationCalibration {
  std::map<std::string, float> input_amax;  // by quantized weight name
  int64_t tokens = 0;                       // tokens whose activations were seen
  std::string source;                       // how it was measured, for metadata ("quantize --calibrate d.txt")
  // A W4A4 checkpoint's input_scale values copied as stored (io/model_copy.h: a copy changes nothing), by weight
  // name; input_scale() returns them before anything derived from input_amax. Not part of the JSON: only copies
  // make them, and nothing saves a copy's calibration.
  std::map<std::string, float> stored_input_scale;

  bool empty() const { return input_amax.empty() && stored_input_scale.empty(); }
  // Keeps the larger of the recorded and the new amax (a finite value >= 0).
  void observe(const std::string& weight_name, float amax);
  // amax / (6 * 448) of the fused group of `weight_name`; Error naming the weight when nothing was recorded for
  // its group.
  float input_scale(const std::string& weight_name) const;

  // {"source": ..., "tokens": N, "input_amax": {name: amax, ...}} (floats round-trip exactly through doubles).
  nlohmann::json to_json() const;
  // Error naming `where` and what is wrong.
  static ActivationCalibration from_json(const nlohmann::json& json, const std::string& where);
};

// The ModelOpt input_scale of an amax: nvfp4_tensor_scale(amax) = amax / (6 * 448) (1 for amax 0).
float modelopt_input_scale(float amax);

}  // namespace nvfp4lm
