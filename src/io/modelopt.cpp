#include "io/modelopt.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/json_text.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

}  // namespace

std::string linear_prefix_of(const std::string& weight_name) {
  constexpr std::string_view suffix = ".weight";
  NVFP4LM_ASSERT(weight_name.size() > suffix.size() && std::string_view(weight_name).ends_with(suffix),
                 "'{}' is not a weight name", weight_name);
  return weight_name.substr(0, weight_name.size() - suffix.size());
}

float read_f32_scalar(const SafetensorsSet& set, const std::string& name) {
  const auto location = set.at(name);
  const SafetensorsEntry& entry = *location.entry;
  NVFP4LM_CHECK(entry.dtype == DType::F32 && entry.shape.numel() == 1, "{}: '{}' must be an F32 scalar, got {} {}",
                location.file->path().string(), name, dtype_name(entry.dtype), entry.shape.str());
  float value;
  std::memcpy(&value, location.file->bytes_of(entry), sizeof(float));
  return value;
}

std::string_view modelopt_quant_algo(bool calibrated) { return calibrated ? kModeloptW4A4Algo : kModeloptW4A16Algo; }

bool modelopt_quant_algo_supported(std::string_view quant_algo) {
  return quant_algo == kModeloptW4A4Algo || quant_algo == kModeloptW4A16Algo;
}

ModeloptQuantConfig load_hf_quant_config(const fs::path& path) {
  const std::string where = path.string();
  const json config = read_json_file(path);
  NVFP4LM_CHECK(config.is_object() && config.contains("quantization") && config["quantization"].is_object(),
                "{}: expected an object with a 'quantization' object", where);
  const json& q = config["quantization"];
  ModeloptQuantConfig result;
  if (config.contains("producer") && config["producer"].is_object()) {
    const json& producer = config["producer"];
    if (producer.contains("name") && producer["name"].is_string()) result.producer_name = producer["name"];
    if (producer.contains("version") && producer["version"].is_string()) result.producer_version = producer["version"];
  }
  NVFP4LM_CHECK(q.contains("quant_algo") && q["quant_algo"].is_string(), "{}: quantization.quant_algo is missing",
                where);
  result.quant_algo = q["quant_algo"].get<std::string>();
  NVFP4LM_CHECK(modelopt_quant_algo_supported(result.quant_algo),
                "{}: quant_algo {} is not supported; only NVFP4 and W4A16_NVFP4 ModelOpt checkpoints can be read",
                where, result.quant_algo);
  if (q.contains("group_size") && !q["group_size"].is_null()) {
    NVFP4LM_CHECK(q["group_size"].is_number_integer(), "{}: quantization.group_size must be an integer", where);
    result.group_size = q["group_size"].get<int64_t>();
  }
  NVFP4LM_CHECK(result.group_size == 16, "{}: group_size {} is not supported (NVFP4 uses 16)", where,
                result.group_size);
  if (q.contains("kv_cache_quant_algo") && q["kv_cache_quant_algo"].is_string())
    result.kv_cache_quant_algo = q["kv_cache_quant_algo"].get<std::string>();
  if (q.contains("exclude_modules") && q["exclude_modules"].is_array()) {
    for (const json& module : q["exclude_modules"]) {
      NVFP4LM_CHECK(module.is_string(), "{}: exclude_modules must list strings", where);
      result.exclude_modules.push_back(module.get<std::string>());
    }
  }
  return result;
}

json hf_quant_config_json(const std::vector<std::string>& exclude_modules, std::string_view quant_algo,
                          const json& calibration_note) {
  return {{"producer", {{"name", "nvfp4lm"}, {"version", NVFP4LM_VERSION}}},
          {"quantization",
           {{"quant_algo", std::string(quant_algo)},
            {"kv_cache_quant_algo", nullptr},
            {"group_size", 16},
            {"exclude_modules", exclude_modules}}},
          {"nvfp4lm", calibration_note}};
}

json modelopt_calibration_note(bool calibrated, const std::string& source, int64_t tokens) {
  if (calibrated) return {{"input_scale", "calibrated"}, {"calibration", {{"source", source}, {"tokens", tokens}}}};
  return {{"input_scale", "none"},
          {"note",
           "weight-only NVFP4 (quant_algo W4A16_NVFP4): activations were not calibrated, so no input_scale is "
           "written and engines keep activations in 16 bits; export or quantize with --calibrate FILE (or train "
           "with --calibrate-steps N) for a W4A4 checkpoint (quant_algo NVFP4) with measured activation scales"}};
}

std::string weight_only_export_notice(const std::string& out) {
  return fmt::format(
      "{}: weight-only NVFP4 (quant_algo W4A16_NVFP4, no input_scale): activations were not calibrated; pass "
      "--calibrate FILE (train: --calibrate-steps N) for a W4A4 export with measured activation scales",
      out);
}

std::string quantized_lm_head_note() {
  return "lm_head is quantized (--quantize-lm-head): vLLM up to at least 0.22.1 cannot load it (its ParallelLMHead "
         "registers only lm_head.weight: \"There is no module or parameter named 'lm_head.input_scale'\" / "
         "'lm_head.weight_scale', vllm-project/vllm issues 44081 and 45102); nvfp4lm loads it; for vLLM export "
         "without --quantize-lm-head";
}

std::string quantized_lm_head_warning(const std::string& out) {
  return fmt::format("{}: {}", out, quantized_lm_head_note());
}

bool modelopt_input_scales_calibrated(const fs::path& model_dir) {
  const fs::path path = model_dir / "hf_quant_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  const json config = read_json_file(path);
  const json note = json_field_or(config, "nvfp4lm", json::object(), path.string());
  return json_field_or(note, "input_scale", std::string(), path.string()) == "calibrated";
}

json modelopt_quantization_config(const std::vector<std::string>& exclude_modules, std::string_view quant_algo) {
  const json four_bit = {{"dynamic", false}, {"num_bits", 4}, {"type", "float"}, {"group_size", 16}};
  const json activations = quant_algo == kModeloptW4A4Algo ? four_bit : json(nullptr);
  return {{"config_groups",
           {{"group_0", {{"input_activations", activations}, {"weights", four_bit}, {"targets", {"Linear"}}}}}},
          {"ignore", exclude_modules},
          {"quant_algo", std::string(quant_algo)},
          {"producer", {{"name", "nvfp4lm"}, {"version", NVFP4LM_VERSION}}},
          {"quant_method", "modelopt"}};
}

ModeloptNames modelopt_names(const std::string& weight_name) {
  const std::string prefix = linear_prefix_of(weight_name);
  return {weight_name, prefix + ".weight_scale", prefix + ".weight_scale_2", prefix + ".input_scale"};
}

bool modelopt_is_quantized(const SafetensorsSet& set, const std::string& weight_name) {
  return set.contains(modelopt_names(weight_name).weight_scale);
}

Nvfp4Tensor read_modelopt_weight(const SafetensorsSet& set, const std::string& weight_name) {
  const ModeloptNames names = modelopt_names(weight_name);
  const auto codes = set.at(names.weight);
  const auto scales = set.at(names.weight_scale);
  const std::string where = fmt::format("{}: '{}'", codes.file->path().string(), weight_name);
  NVFP4LM_CHECK(codes.entry->dtype == DType::U8 && codes.entry->shape.rank() == 2,
                "{}: a quantized weight must be U8 [out, in/2] (two FP4 codes per byte), got {} {}", where,
                dtype_name(codes.entry->dtype), codes.entry->shape.str());
  NVFP4LM_CHECK(scales.entry->dtype == DType::E4M3 && scales.entry->shape.rank() == 2,
                "{}: weight_scale must be F8_E4M3 [out, in/16], got {} {}", where, dtype_name(scales.entry->dtype),
                scales.entry->shape.str());
  Nvfp4Tensor q;
  q.rows = codes.entry->shape[0];
  q.cols = codes.entry->shape[1] * 2;
  q.codes = codes.file->tensor(*codes.entry).view_as(DType::E2M1x2);
  q.block_scales = scales.file->tensor(*scales.entry);
  NVFP4LM_CHECK(set.contains(names.weight_scale_2), "{}: weight_scale_2 (the tensor scale) is missing", where);
  q.tensor_scale = read_f32_scalar(set, names.weight_scale_2);
  read_modelopt_input_scale(set, weight_name);  // validated with the weight
  validate_nvfp4(q, where);
  return q;
}

float read_modelopt_input_scale(const SafetensorsSet& set, const std::string& weight_name) {
  const ModeloptNames names = modelopt_names(weight_name);
  if (!set.contains(names.input_scale)) return 0.0f;
  const float input_scale = read_f32_scalar(set, names.input_scale);
  NVFP4LM_CHECK(std::isfinite(input_scale) && input_scale > 0, "{}: '{}': input_scale {} must be finite and positive",
                set.at(names.input_scale).file->path().string(), weight_name, input_scale);
  return input_scale;
}

uint64_t modelopt_weight_file_bytes(const SafetensorsSet& set, const std::string& weight_name) {
  const ModeloptNames names = modelopt_names(weight_name);
  uint64_t bytes = 0;
  for (const std::string* name : {&names.weight, &names.weight_scale, &names.weight_scale_2, &names.input_scale})
    if (auto location = set.find(*name)) bytes += location->entry->bytes;
  return bytes;
}

void drop_modelopt_weight_pages(const SafetensorsSet& set, const std::string& weight_name) {
  const ModeloptNames names = modelopt_names(weight_name);
  for (const std::string* name : {&names.weight, &names.weight_scale})
    if (set.contains(*name)) set.drop_pages(*name);
}

void declare_modelopt_weight(std::vector<SafetensorsEntrySpec>& entries, const std::string& weight_name, int64_t rows,
                             int64_t cols, bool with_input_scale) {
  NVFP4LM_CHECK(cols % 16 == 0 && cols > 0 && rows > 0,
                "'{}': [{}, {}] cannot be stored as NVFP4 (columns must be a positive multiple of 16)", weight_name,
                rows, cols);
  const ModeloptNames names = modelopt_names(weight_name);
  entries.push_back({names.weight, DType::U8, Shape{rows, cols / 2}});
  entries.push_back({names.weight_scale, DType::E4M3, Shape{rows, cols / 16}});
  entries.push_back({names.weight_scale_2, DType::F32, Shape{}});
  if (with_input_scale) entries.push_back({names.input_scale, DType::F32, Shape{}});
}

uint64_t modelopt_weight_bytes(int64_t rows, int64_t cols, bool with_input_scale) {
  return static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols / 2 + cols / 16) + (with_input_scale ? 8 : 4);
}

void write_modelopt_weight(SafetensorsWriter& writer, const std::string& weight_name, const Nvfp4Tensor& q,
                           std::optional<float> input_scale) {
  validate_nvfp4(q, weight_name);
  NVFP4LM_CHECK(!input_scale || (std::isfinite(*input_scale) && *input_scale > 0),
                "'{}': input_scale {} must be finite and positive", weight_name, input_scale.value_or(0.0f));
  NVFP4LM_CHECK(q.device().is_cpu(), "'{}': quantized weight must be on the CPU to be written", weight_name);
  const ModeloptNames names = modelopt_names(weight_name);
  writer.write(names.weight, q.codes);
  writer.write(names.weight_scale, q.block_scales);
  writer.write_bytes(names.weight_scale_2, &q.tensor_scale, sizeof(float));
  if (input_scale) writer.write_bytes(names.input_scale, &*input_scale, sizeof(float));
}

}  // namespace nvfp4lm
