#include "io/compressed_tensors.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/numeric.h"
#include "io/modelopt.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

// QuantizationArgs.model_dump() of the 4-bit float, tensor_group, group-16 arguments of quant_scheme.py's NVFP4
// presets. Weights: dynamic false, and no observer given, so quant_args.py's validate_model_after sets
// "memoryless_minmax"; activations: dynamic "local" with observer "static_minmax" as the preset names it. zp_dtype
// serializes as null for symmetric arguments (quant_args.py serialize_dtype), scale_dtype as str(torch dtype).
json nvfp4_args(bool activations) {
  return {{"num_bits", 4},
          {"type", "float"},
          {"symmetric", true},
          {"group_size", 16},
          {"strategy", "tensor_group"},
          {"block_structure", nullptr},
          {"dynamic", activations ? json("local") : json(false)},
          {"actorder", nullptr},
          {"scale_dtype", "torch.float8_e4m3fn"},
          {"zp_dtype", nullptr},
          {"observer", activations ? "static_minmax" : "memoryless_minmax"},
          {"observer_kwargs", json::object()}};
}

std::string field_text(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return "(missing)";
  return object[key].dump();
}

// The checks of vLLM's CompressedTensorsConfig._is_fp4a4_nvfp4 / _is_fp4a16_nvfp4 (compressed_tensors.py) on one
// QuantizationArgs object: 4-bit float, tensor_group, group_size 16, symmetric.
void check_nvfp4_args(const json& args, const std::string& where, const char* what) {
  const bool ok = args.is_object() && args.value("num_bits", 0) == 4 && args.value("type", std::string()) == "float" &&
                  args.value("strategy", std::string()) == "tensor_group" && args.value("group_size", 0) == 16 &&
                  args.value("symmetric", true);
  NVFP4LM_CHECK(ok,
                "{}: {} are not NVFP4 (need num_bits 4, type float, strategy tensor_group, group_size 16, symmetric; "
                "got num_bits {}, type {}, strategy {}, group_size {}); nvfp4lm reads the NVFP4 and NVFP4A16 schemes "
                "of compressed-tensors only",
                where, what, field_text(args, "num_bits"), field_text(args, "type"), field_text(args, "strategy"),
                field_text(args, "group_size"));
}

}  // namespace

CompressedTensorsNames compressed_tensors_names(const std::string& weight_name) {
  const std::string prefix = linear_prefix_of(weight_name);
  return {prefix + ".weight_packed", prefix + ".weight_scale", prefix + ".weight_global_scale",
          prefix + ".input_global_scale"};
}

CompressedTensorsConfig parse_compressed_tensors_config(const json& q, const std::string& where) {
  NVFP4LM_CHECK(q.is_object() && q.value("quant_method", std::string()) == kCompressedTensorsMethod,
                "{}: quantization_config.quant_method must be \"compressed-tensors\"", where);
  const std::string top_format = q.value("format", std::string(kCompressedTensorsNvfp4Format));
  NVFP4LM_CHECK(q.contains("config_groups") && q["config_groups"].is_object() && !q["config_groups"].empty(),
                "{}: a compressed-tensors quantization_config needs config_groups", where);
  if (q.contains("sparsity_config") && q["sparsity_config"].is_object())
    NVFP4LM_CHECK(q["sparsity_config"].empty(), "{}: sparse compressed-tensors checkpoints are not supported", where);
  if (q.contains("transform_config") && q["transform_config"].is_object())
    NVFP4LM_CHECK(q["transform_config"].empty(),
                  "{}: compressed-tensors transforms (rotations) are not supported; nvfp4lm would run the weights "
                  "without them",
                  where);
  CompressedTensorsConfig config;
  std::optional<bool> w4a4;
  for (const auto& [name, group] : q["config_groups"].items()) {
    const std::string group_where = fmt::format("{}: config_groups.{}", where, name);
    NVFP4LM_CHECK(group.is_object(), "{} must be an object", group_where);
    const std::string format =
        group.contains("format") && group["format"].is_string() ? group["format"].get<std::string>() : top_format;
    NVFP4LM_CHECK(format == kCompressedTensorsNvfp4Format,
                  "{}: format '{}' is not supported; nvfp4lm reads compressed-tensors' NVFP4 checkpoints "
                  "(format nvfp4-pack-quantized)",
                  group_where, format);
    NVFP4LM_CHECK(group.contains("weights") && group["weights"].is_object(), "{}: no weights arguments", group_where);
    check_nvfp4_args(group["weights"], group_where, "the weights' arguments");
    const bool group_w4a4 = group.contains("input_activations") && !group["input_activations"].is_null();
    if (group_w4a4) check_nvfp4_args(group["input_activations"], group_where, "the input activations' arguments");
    NVFP4LM_CHECK(!group.contains("output_activations") || group["output_activations"].is_null(),
                  "{}: quantized output activations are not supported", group_where);
    NVFP4LM_CHECK(!w4a4 || *w4a4 == group_w4a4, "{}: groups mix W4A4 and weight-only NVFP4; not supported",
                  group_where);
    w4a4 = group_w4a4;
  }
  config.w4a4 = *w4a4;
  if (q.contains("ignore") && q["ignore"].is_array())
    for (const json& module : q["ignore"]) {
      NVFP4LM_CHECK(module.is_string(), "{}: quantization_config.ignore must list strings", where);
      config.ignore.push_back(module.get<std::string>());
    }
  return config;
}

json compressed_tensors_quantization_config(const std::vector<std::string>& ignore, bool w4a4) {
  const json scheme = {{"targets", {"Linear"}},
                       {"weights", nvfp4_args(false)},
                       {"input_activations", w4a4 ? nvfp4_args(true) : json(nullptr)},
                       {"output_activations", nullptr},
                       {"format", kCompressedTensorsNvfp4Format}};
  // ModelCompressor.update_config (model_compressor.py): version, quant_method, sparsity_config {}, transform_config,
  // then QuantizationConfig.model_dump() without quant_method; status "compressed" once written packed.
  return {{"version", kCompressedTensorsVersion},    {"quant_method", kCompressedTensorsMethod},
          {"sparsity_config", json::object()},       {"transform_config", json::object()},
          {"config_groups", {{"group_0", scheme}}},  {"kv_cache_scheme", nullptr},
          {"format", kCompressedTensorsNvfp4Format}, {"quantization_status", "compressed"},
          {"global_compression_ratio", nullptr},     {"ignore", ignore}};
}

bool compressed_tensors_is_quantized(const SafetensorsSet& set, const std::string& weight_name) {
  return set.contains(compressed_tensors_names(weight_name).weight_packed);
}

std::optional<std::string> compressed_tensors_weight_of_packed(std::string_view name) {
  constexpr std::string_view suffix = ".weight_packed";
  if (!name.ends_with(suffix) || name.size() == suffix.size()) return std::nullopt;
  return std::string(name.substr(0, name.size() - suffix.size())) + ".weight";
}

bool compressed_tensors_part_of_quantized(const SafetensorsSet& set, const std::string& name) {
  if (compressed_tensors_weight_of_packed(name)) return true;
  for (std::string_view suffix : {".weight_scale", ".weight_global_scale", ".input_global_scale"}) {
    if (!std::string_view(name).ends_with(suffix)) continue;
    const std::string prefix = name.substr(0, name.size() - suffix.size());
    if (set.contains(prefix + ".weight_packed")) return true;
  }
  return false;
}

Nvfp4Tensor read_compressed_tensors_weight(const SafetensorsSet& set, const std::string& weight_name) {
  const CompressedTensorsNames names = compressed_tensors_names(weight_name);
  const auto codes = set.at(names.weight_packed);
  const std::string where = fmt::format("{}: '{}'", codes.file->path().string(), names.weight_packed);
  NVFP4LM_CHECK(codes.entry->dtype == DType::U8 && codes.entry->shape.rank() == 2,
                "{}: weight_packed must be U8 [out, in/2] (two FP4 codes per byte), got {} {}", where,
                dtype_name(codes.entry->dtype), codes.entry->shape.str());
  NVFP4LM_CHECK(set.contains(names.weight_scale), "{}: weight_scale (the E4M3 block scales) is missing", where);
  NVFP4LM_CHECK(set.contains(names.weight_global_scale), "{}: weight_global_scale is missing", where);
  const auto scales = set.at(names.weight_scale);
  NVFP4LM_CHECK(scales.entry->dtype == DType::E4M3 && scales.entry->shape.rank() == 2,
                "{}: weight_scale must be F8_E4M3 [out, in/16], got {} {}", where, dtype_name(scales.entry->dtype),
                scales.entry->shape.str());
  const float global_scale = read_f32_scalar(set, names.weight_global_scale);
  NVFP4LM_CHECK(std::isfinite(global_scale) && global_scale > 0,
                "{}: weight_global_scale {} must be finite and positive", where, global_scale);
  Nvfp4Tensor q;
  q.rows = codes.entry->shape[0];
  q.cols = codes.entry->shape[1] * 2;
  q.codes = codes.file->tensor(*codes.entry).view_as(DType::E2M1x2);
  q.block_scales = scales.file->tensor(*scales.entry);
  q.tensor_scale = 1.0f / global_scale;                   // as vLLM: 1.0 / weight_global_scale in float32
  read_compressed_tensors_input_scale(set, weight_name);  // validated with the weight
  validate_nvfp4(q, where);
  return q;
}

float read_compressed_tensors_input_scale(const SafetensorsSet& set, const std::string& weight_name) {
  const CompressedTensorsNames names = compressed_tensors_names(weight_name);
  if (!set.contains(names.input_global_scale)) return 0.0f;
  const float global_scale = read_f32_scalar(set, names.input_global_scale);
  NVFP4LM_CHECK(std::isfinite(global_scale) && global_scale > 0,
                "{}: '{}': input_global_scale {} must be finite and positive",
                set.at(names.input_global_scale).file->path().string(), weight_name, global_scale);
  const float input_scale = 1.0f / global_scale;
  NVFP4LM_CHECK(input_scale > 0 && std::isfinite(input_scale), "{}: '{}': input_global_scale {} has no usable inverse",
                set.at(names.input_global_scale).file->path().string(), weight_name, global_scale);
  return input_scale;
}

uint64_t compressed_tensors_weight_file_bytes(const SafetensorsSet& set, const std::string& weight_name) {
  const CompressedTensorsNames names = compressed_tensors_names(weight_name);
  uint64_t bytes = 0;
  for (const std::string* name :
       {&names.weight_packed, &names.weight_scale, &names.weight_global_scale, &names.input_global_scale})
    if (auto location = set.find(*name)) bytes += location->entry->bytes;
  return bytes;
}

void drop_compressed_tensors_weight_pages(const SafetensorsSet& set, const std::string& weight_name) {
  const CompressedTensorsNames names = compressed_tensors_names(weight_name);
  for (const std::string* name : {&names.weight_packed, &names.weight_scale})
    if (set.contains(*name)) set.drop_pages(*name);
}

float compressed_tensors_global_scale(float tensor_scale) {
  NVFP4LM_CHECK(std::isfinite(tensor_scale) && tensor_scale > 0, "tensor scale {} must be finite and positive",
                tensor_scale);
  const float nearest = 1.0f / tensor_scale;
  const float as_bf16 = bf16_to_float(float_to_bf16(nearest));
  if (1.0f / as_bf16 == tensor_scale) return as_bf16;
  // 1/x is monotonic, so the floats g whose 1.0f / g is tensor_scale are next to `nearest` when there are any.
  for (int steps = 0; steps <= 2; ++steps)
    for (const float direction : {INFINITY, 0.0f}) {
      float candidate = nearest;
      for (int i = 0; i < steps; ++i) candidate = std::nextafter(candidate, direction);
      if (1.0f / candidate == tensor_scale) return candidate;
    }
  return nearest;
}

void declare_compressed_tensors_weight(std::vector<SafetensorsEntrySpec>& entries, const std::string& weight_name,
                                       int64_t rows, int64_t cols, bool with_input_scale) {
  NVFP4LM_CHECK(cols % 16 == 0 && cols > 0 && rows > 0,
                "'{}': [{}, {}] cannot be stored as NVFP4 (columns must be a positive multiple of 16)", weight_name,
                rows, cols);
  const CompressedTensorsNames names = compressed_tensors_names(weight_name);
  // The order compressed-tensors' NVFP4PackedCompressor.compression_param_names lists them (nvfp4/base.py).
  entries.push_back({names.weight_packed, DType::U8, Shape{rows, cols / 2}});
  entries.push_back({names.weight_scale, DType::E4M3, Shape{rows, cols / 16}});
  entries.push_back({names.weight_global_scale, DType::F32, Shape{1}});
  if (with_input_scale) entries.push_back({names.input_global_scale, DType::F32, Shape{1}});
}

bool write_compressed_tensors_weight(SafetensorsWriter& writer, const std::string& weight_name, const Nvfp4Tensor& q,
                                     std::optional<float> input_scale) {
  validate_nvfp4(q, weight_name);
  NVFP4LM_CHECK(!input_scale || (std::isfinite(*input_scale) && *input_scale > 0),
                "'{}': input_scale {} must be finite and positive", weight_name, input_scale.value_or(0.0f));
  NVFP4LM_CHECK(q.device().is_cpu() && q.layout == Nvfp4Layout::Rows,
                "'{}': quantized weight must be on the CPU, in rows, to be written", weight_name);
  const CompressedTensorsNames names = compressed_tensors_names(weight_name);
  const float global_scale = compressed_tensors_global_scale(q.tensor_scale);
  writer.write(names.weight_packed, q.codes.view_as(DType::U8));
  writer.write(names.weight_scale, q.block_scales);
  writer.write_bytes(names.weight_global_scale, &global_scale, sizeof(float));
  if (input_scale) {
    const float input_global_scale = compressed_tensors_global_scale(*input_scale);
    writer.write_bytes(names.input_global_scale, &input_global_scale, sizeof(float));
  }
  return 1.0f / global_scale == q.tensor_scale;
}

}  // namespace nvfp4lm
