// See gguf_info.h.
#include "io/gguf_info.h"

#include <fmt/format.h>

#include <map>

namespace nvfp4lm {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr size_t kArrayPreview = 4;

// Metadata strings are whatever the file holds: invalid UTF-8 is shown as U+FFFD rather than refused.
std::string dump_text(const ordered_json& value) {
  return value.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

ordered_json value_json(const GgufValue& value) {
  auto element = [&](size_t i) -> ordered_json {
    if (value.type == gguf::ValueType::String) return value.strings[i];
    if (value.type == gguf::ValueType::Bool) return value.unsigned_values[i] != 0;
    if (!value.float_values.empty()) return value.float_values[i];
    if (!value.signed_values.empty()) return value.signed_values[i];
    return value.unsigned_values[i];
  };
  if (!value.is_array) return element(0);
  ordered_json preview = ordered_json::array();
  for (size_t i = 0; i < std::min(kArrayPreview, value.size()); ++i) preview.push_back(element(i));
  return {{"array", gguf::value_type_name(value.type)}, {"length", value.size()}, {"first", preview}};
}

}  // namespace

ordered_json gguf_info_json(const GgufFile& file) {
  ordered_json info;
  info["path"] = file.origin();
  info["format"] = "gguf";
  info["version"] = file.version();
  info["alignment"] = file.alignment();
  info["file_bytes"] = file.file_bytes();
  ordered_json metadata = ordered_json::object();
  for (const auto& [key, value] : file.metadata()) {
    // The chat template is long: its length is what a reader needs here.
    if (key == "tokenizer.chat_template" && value.string())
      metadata[key] = fmt::format("({} characters)", value.string()->size());
    else
      metadata[key] = value_json(value);
  }
  info["metadata"] = metadata;
  ordered_json tensors = ordered_json::array();
  std::map<std::string, std::pair<int64_t, uint64_t>> by_type;  // type -> (tensors, bytes)
  int64_t parameters = 0;
  for (const GgufTensorInfo& tensor : file.tensors()) {
    tensors.push_back(
        {{"name", tensor.name}, {"type", tensor.type}, {"shape", tensor.shape.to_vector()}, {"bytes", tensor.bytes}});
    auto& [count, bytes] = by_type[std::string(tensor.type)];
    ++count;
    bytes += tensor.bytes;
    parameters += tensor.shape.numel();
  }
  info["tensors"] = tensors;
  ordered_json totals = ordered_json::object();
  for (const auto& [type, entry] : by_type) totals[type] = {{"tensors", entry.first}, {"bytes", entry.second}};
  info["by_type"] = totals;
  info["parameters"] = parameters;
  return info;
}

std::string gguf_info_text(const ordered_json& info) {
  std::string text =
      fmt::format("{}: GGUF v{}, alignment {}, {:.1f} MiB, {} tensors, {} parameters\n",
                  info["path"].get<std::string>(), info["version"].get<int>(), info["alignment"].get<uint64_t>(),
                  static_cast<double>(info["file_bytes"].get<uint64_t>()) / (1 << 20), info["tensors"].size(),
                  info["parameters"].get<int64_t>());
  text += "metadata:\n";
  for (const auto& [key, value] : info["metadata"].items())
    text += fmt::format("  {:<44} {}\n", key, value.is_string() ? value.get<std::string>() : dump_text(value));
  text += fmt::format("{:<40} {:<8} {:<18} {:>14}\n", "tensor", "type", "shape", "bytes");
  for (const auto& tensor : info["tensors"])
    text += fmt::format("{:<40} {:<8} {:<18} {:>14}\n", tensor["name"].get<std::string>(),
                        tensor["type"].get<std::string>(), dump_text(tensor["shape"]), tensor["bytes"].get<uint64_t>());
  text += "by type:\n";
  for (const auto& [type, entry] : info["by_type"].items())
    text += fmt::format("  {:<8} {:>5} tensors {:>12.1f} MiB\n", type, entry["tensors"].get<int64_t>(),
                        static_cast<double>(entry["bytes"].get<uint64_t>()) / (1 << 20));
  return text;
}

}  // namespace nvfp4lm
