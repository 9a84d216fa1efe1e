// See activation_calibration.h.
#include "io/activation_calibration.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/json_text.h"
#include "io/weight_names.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

using json = nlohmann::json;

float modelopt_input_scale(float amax) { return nvfp4_tensor_scale(amax); }

void ActivationCalibration::observe(const std::string& weight_name, float amax) {
  NVFP4LM_ASSERT(std::isfinite(amax) && amax >= 0, "calibration: amax {} of {}", amax, weight_name);
  float& recorded = input_amax[weight_name];
  recorded = std::max(recorded, amax);
}

float ActivationCalibration::input_scale(const std::string& weight_name) const {
  if (const auto stored = stored_input_scale.find(weight_name); stored != stored_input_scale.end())
    return stored->second;
  const std::string group = fused_scale_group(weight_name);
  bool found = false;
  float amax = 0;
  for (const auto& [name, value] : input_amax) {
    if (fused_scale_group(name) != group) continue;
    found = true;
    amax = std::max(amax, value);
  }
  NVFP4LM_CHECK(found,
                "activation calibration ({}) has no input range for '{}'; calibrate with the model being exported "
                "(the same quantized weights, e.g. --quantize-lm-head both times)",
                source.empty() ? "unnamed" : source, weight_name);
  return modelopt_input_scale(amax);
}

json ActivationCalibration::to_json() const {
  json amax = json::object();
  for (const auto& [name, value] : input_amax) amax[name] = static_cast<double>(value);
  return {{"source", source}, {"tokens", tokens}, {"input_amax", amax}};
}

ActivationCalibration ActivationCalibration::from_json(const json& value, const std::string& where) {
  NVFP4LM_CHECK(value.is_object(), "{}: the activation calibration must be a JSON object, found {}", where,
                json_excerpt(value));
  ActivationCalibration calibration;
  calibration.source = json_field_or(value, "source", std::string(), where);
  calibration.tokens = json_field_or(value, "tokens", int64_t{0}, where);
  NVFP4LM_CHECK(calibration.tokens >= 0, "{}: calibration tokens {} is negative", where, calibration.tokens);
  const json amax = json_field_or(value, "input_amax", json::object(), where);
  NVFP4LM_CHECK(amax.is_object(), "{}: \"input_amax\" must be an object of weight name -> amax", where);
  for (const auto& [name, number] : amax.items()) {
    NVFP4LM_CHECK(number.is_number() && std::isfinite(number.get<double>()) && number.get<double>() >= 0 &&
                      number.get<double>() <= 3.4e38,
                  "{}: input_amax of '{}' is {}, expected a finite number >= 0", where, name, json_excerpt(number));
    calibration.input_amax[name] = static_cast<float>(number.get<double>());
  }
  return calibration;
}

}  // namespace nvfp4lm
