// See model_copy.h.
#include "io/model_copy.h"

#include <fmt/format.h>

#include <vector>

#include "core/error.h"
#include "io/compressed_tensors.h"
#include "io/model_formats.h"
#include "io/model_writer.h"
#include "io/quantize_model.h"

namespace nvfp4lm {

std::string copy_obstacle(const ModelFiles& source, ModelFormat format) {
  const FormatCapabilities& capabilities = format_capabilities(format);
  bool any_nvfp4 = false;
  for (const WeightInfo& info : source.weights()) {
    if (!info.kind || !info.nvfp4) continue;
    any_nvfp4 = true;
    const ModelWeight weight = source.load(info.name);
    const float tensor_scale = weight.nvfp4.tensor_scale, input_scale = weight.input_scale;
    source.release(info.name);
    // Only ModelOpt and compressed-tensors store a W4A4 checkpoint's activation scales; elsewhere the copy would run
    // W4A16.
    if (input_scale > 0 && !capabilities.activation_scales)
      return fmt::format(
          "it is a W4A4 checkpoint (input_scale {} on {}), whose activation scales the {} format "
          "cannot hold",
          input_scale, info.name, model_format_name(format));
    if (format == ModelFormat::HfSafetensors || capabilities.stores_tensor_scale) continue;
    if (!holds_tensor_scale(capabilities, tensor_scale))
      return fmt::format("its NVFP4 weights carry tensor scales (e.g. {} of {}), which the {} format cannot hold",
                         tensor_scale, info.name, model_format_name(format));
  }
  if (!any_nvfp4 && format != ModelFormat::HfSafetensors)
    return fmt::format("it has no NVFP4 weight; writing it as {} would quantize it (nvfp4lm quantize does that)",
                       model_format_name(format));
  return {};
}

size_t scales_moved_by_copy(const ModelFiles& source, ModelFormat format) {
  if (format != ModelFormat::CompressedTensorsNvfp4) return 0;
  size_t moved = 0;
  for (const WeightInfo& info : source.weights()) {
    if (!info.kind || !info.nvfp4) continue;
    const float tensor_scale = source.load(info.name).nvfp4.tensor_scale;
    source.release(info.name);
    moved += 1.0f / compressed_tensors_global_scale(tensor_scale) != tensor_scale ? 1 : 0;
  }
  return moved;
}

void write_model_copy(const ModelFiles& source, const fs::path& out, ModelFormat format) {
  const std::string obstacle = copy_obstacle(source, format);
  NVFP4LM_CHECK(obstacle.empty(), "cannot write {} unchanged as {}: {}", source.path().string(),
                model_format_name(format), obstacle);
  const bool dense_bf16 = format == ModelFormat::HfSafetensors;
  std::vector<WeightPlan> plan;
  for (const WeightInfo& info : source.weights()) {
    if (!info.kind) continue;  // not a Qwen3 weight: the model ignores it, the copy leaves it out
    const bool nvfp4 = info.nvfp4 && !dense_bf16;
    plan.push_back({info.name, info.shape, nvfp4, dense_bf16 || info.nvfp4 ? DType::BF16 : info.dtype});
  }
  ModelWriterOptions options;
  options.config_json = source.config_json();
  options.copy_files = model_side_files(source);
  // A W4A4 checkpoint stays one: its input_scale values are written as stored.
  ActivationCalibration stored;
  stored.source = "copied from " + source.path().string();
  for (const WeightPlan& weight : plan) {
    if (!weight.nvfp4) continue;
    if (const float input_scale = source.load(weight.name).input_scale; input_scale > 0)
      stored.stored_input_scale[weight.name] = input_scale;
    source.release(weight.name);
  }
  if (!stored.stored_input_scale.empty()) options.calibration = stored;
  ModelWriter writer(format, out, plan, options);
  for (const WeightPlan& weight : plan) {
    const ModelWeight loaded = source.load(weight.name);
    if (weight.nvfp4) {
      writer.write_nvfp4(weight.name, loaded.nvfp4);
    } else {
      writer.write_dense(weight.name, loaded.is_nvfp4() ? dequantize_nvfp4(loaded.nvfp4, DType::F32) : loaded.dense);
    }
    source.release(weight.name);
  }
  writer.finish();
}

}  // namespace nvfp4lm
