#include "io/model_info.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/numeric.h"
#include "io/dat_format.h"
#include "io/safetensors_reader.h"
#include "quant/e4m3.h"

namespace nvfp4lm {
namespace {

using ojson = nlohmann::ordered_json;

// Element i of a raw little-endian buffer of `type` as double.
double element(const uint8_t* data, DatType type, uint64_t i) {
  auto load = [&](auto value) {
    std::memcpy(&value, data + i * sizeof(value), sizeof(value));
    return value;
  };
  switch (type) {
    case DatType::U8:
    case DatType::Bool:
    case DatType::E2M1x2:
      return data[i];
    case DatType::I8:
      return static_cast<int8_t>(data[i]);
    case DatType::I16:
      return load(int16_t{});
    case DatType::I32:
      return load(int32_t{});
    case DatType::I64:
      return static_cast<double>(load(int64_t{}));
    case DatType::F16:
      return f16_to_float(load(uint16_t{}));
    case DatType::BF16:
      return bf16_to_float(load(uint16_t{}));
    case DatType::F32:
      return load(float{});
    case DatType::F64:
      return load(double{});
    case DatType::E4M3:
      return e4m3_to_float(data[i]);
  }
  return 0;
}

ojson checksum_entry(const std::string& name, std::string_view dtype, const Shape& shape, const uint8_t* data,
                     DatType type, uint64_t count) {
  double sum = 0, abs_sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum, abs_sum)
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
    const double value = element(data, type, static_cast<uint64_t>(i));
    sum += value;
    abs_sum += std::fabs(value);
  }
  return {{"name", name}, {"dtype", dtype}, {"shape", shape.to_vector()}, {"sum", sum}, {"abs_sum", abs_sum}};
}

ojson checksums(const ModelFiles& model) {
  ojson files = ojson::array();
  for (const fs::path& path : model.data_files()) {
    ojson tensors = ojson::array();
    if (model.format() == ModelFormat::Dat) {
      const auto file = DatFile::open(path);
      for (const DatEntry& entry : file->entries()) {
        tensors.push_back(checksum_entry(entry.key, dat_type_name(entry.type), entry.shape(), file->bytes_of(entry),
                                         entry.type, entry.bytes / dat_type_bytes(entry.type)));
        file->drop_pages(entry);
      }
    } else {
      const auto file = SafetensorsFile::open(path);
      for (const SafetensorsEntry& entry : file->entries()) {
        tensors.push_back(checksum_entry(entry.name, dtype_to_safetensors(entry.dtype), entry.shape,
                                         file->bytes_of(entry), dat_type_of(entry.dtype),
                                         static_cast<uint64_t>(entry.shape.numel())));
        file->drop_pages(entry);
      }
    }
    files.push_back({{"file", path.filename().string()}, {"tensors", tensors}});
  }
  return files;
}

std::string with_commas(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string human_bytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{} B", bytes);
}

}  // namespace

ojson model_info_json(const ModelFiles& model, const ModelInfoOptions& options) {
  const Qwen3Config& c = model.config();
  ojson info;
  info["path"] = model.path().string();
  info["format"] = model_format_name(model.format());
  info["architecture"] = "Qwen3ForCausalLM";
  info["config_path"] = model.config_path().string();
  info["tokenizer_dir"] = model.tokenizer_dir() ? ojson(model.tokenizer_dir()->string()) : ojson(nullptr);
  ojson files = ojson::array();
  uint64_t file_bytes = 0;
  for (const fs::path& path : model.data_files()) {
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    files.push_back({{"file", path.string()}, {"bytes", size}});
    file_bytes += size;
  }
  info["data_files"] = files;
  info["config"] = {{"vocab_size", c.vocab_size},
                    {"hidden_size", c.hidden_size},
                    {"intermediate_size", c.intermediate_size},
                    {"num_hidden_layers", c.num_hidden_layers},
                    {"num_attention_heads", c.num_attention_heads},
                    {"num_key_value_heads", c.num_key_value_heads},
                    {"head_dim", c.head_dim},
                    {"q_dim", c.q_dim()},
                    {"kv_dim", c.kv_dim()},
                    {"rms_norm_eps", c.rms_norm_eps},
                    {"rope_theta", c.rope_theta},
                    {"max_position_embeddings", c.max_position_embeddings},
                    {"tie_word_embeddings", c.tie_word_embeddings},
                    {"bos_token_id", c.bos_token_id ? ojson(*c.bos_token_id) : ojson(nullptr)},
                    {"eos_token_ids", c.eos_token_ids},
                    {"torch_dtype", c.torch_dtype}};

  std::map<std::string, int64_t> by_kind;
  int64_t total = 0, nvfp4_parameters = 0, ignored = 0;
  uint64_t nvfp4_bytes = 0, dense_bytes = 0;
  ojson tensors = ojson::array();
  for (const WeightInfo& weight : model.weights()) {
    const int64_t parameters = weight.shape.numel();
    const std::string kind = weight.kind ? std::string(weight_kind_name(*weight.kind)) : "ignored";
    tensors.push_back({{"name", weight.name},
                       {"kind", kind},
                       {"nvfp4", weight.nvfp4},
                       {"dtype", weight.nvfp4 ? "NVFP4" : dtype_name(weight.dtype)},
                       {"storage", weight.storage},
                       {"shape", weight.shape.to_vector()},
                       {"parameters", parameters},
                       {"bytes", weight.file_bytes}});
    (weight.nvfp4 ? nvfp4_bytes : dense_bytes) += weight.file_bytes;
    if (!weight.kind) {
      ignored += parameters;
      continue;
    }
    by_kind[kind] += parameters;
    total += parameters;
    if (weight.nvfp4) nvfp4_parameters += parameters;
  }
  info["tensors"] = tensors;
  ojson parameters = {{"total", total}, {"embedding", by_kind["embedding"]}};
  parameters["non_embedding"] = total - by_kind["embedding"];
  for (const char* kind : {"attention", "mlp", "qk_norm", "layer_norm", "final_norm", "lm_head"})
    parameters[kind] = by_kind[kind];
  parameters["nvfp4"] = nvfp4_parameters;
  parameters["dense"] = total - nvfp4_parameters;
  parameters["ignored"] = ignored;
  info["parameters"] = parameters;
  info["bytes"] = {
      {"weights", nvfp4_bytes + dense_bytes}, {"nvfp4", nvfp4_bytes}, {"dense", dense_bytes}, {"files", file_bytes}};
  if (options.checksums) info["checksums"] = checksums(model);
  return info;
}

std::string model_info_text(const ojson& info) {
  const ojson& c = info["config"];
  std::string text;
  text += fmt::format("model       {} ({})\n", info["path"].get<std::string>(), info["format"].get<std::string>());
  text += fmt::format(
      "arch        {}: {} layers, hidden {}, heads {} q / {} kv x {}, intermediate {}, vocab {}, {}, rope_theta {:g}, "
      "eps {:g}, max positions {}{}\n",
      info["architecture"].get<std::string>(), c["num_hidden_layers"].get<int64_t>(), c["hidden_size"].get<int64_t>(),
      c["num_attention_heads"].get<int64_t>(), c["num_key_value_heads"].get<int64_t>(), c["head_dim"].get<int64_t>(),
      c["intermediate_size"].get<int64_t>(), c["vocab_size"].get<int64_t>(),
      c["tie_word_embeddings"].get<bool>() ? "tied embeddings" : "separate lm_head", c["rope_theta"].get<double>(),
      c["rms_norm_eps"].get<double>(), c["max_position_embeddings"].get<int64_t>(),
      c["torch_dtype"].get<std::string>().empty() ? "" : ", " + c["torch_dtype"].get<std::string>());
  text += fmt::format("config      {}\n", info["config_path"].get<std::string>());
  text += fmt::format("tokenizer   {}\n",
                      info["tokenizer_dir"].is_null() ? "none" : info["tokenizer_dir"].get<std::string>());
  for (const auto& file : info["data_files"])
    text += fmt::format("data        {} ({})\n", file["file"].get<std::string>(),
                        human_bytes(file["bytes"].get<uint64_t>()));
  text += fmt::format("\n{:<52} {:<11} {:<8} {:<16} {:>12}\n", "tensor", "kind", "dtype", "shape", "bytes");
  for (const auto& t : info["tensors"]) {
    std::string shape = "[";
    for (size_t i = 0; i < t["shape"].size(); ++i)
      shape += (i ? ", " : "") + std::to_string(t["shape"][i].get<int64_t>());
    shape += "]";
    text +=
        fmt::format("{:<52} {:<11} {:<8} {:<16} {:>12}\n", t["name"].get<std::string>(), t["kind"].get<std::string>(),
                    t["dtype"].get<std::string>(), shape, with_commas(t["bytes"].get<int64_t>()));
  }
  const ojson& p = info["parameters"];
  text += fmt::format(
      "\nparameters  {} total: embedding {}, attention {}, mlp {}, norms {}, lm_head {}{}\n",
      with_commas(p["total"].get<int64_t>()), with_commas(p["embedding"].get<int64_t>()),
      with_commas(p["attention"].get<int64_t>()), with_commas(p["mlp"].get<int64_t>()),
      with_commas(p["qk_norm"].get<int64_t>() + p["layer_norm"].get<int64_t>() + p["final_norm"].get<int64_t>()),
      with_commas(p["lm_head"].get<int64_t>()),
      p["ignored"].get<int64_t>() ? fmt::format(" ({} in ignored tensors)", with_commas(p["ignored"].get<int64_t>()))
                                  : "");
  text += fmt::format("            {} NVFP4, {} dense\n", with_commas(p["nvfp4"].get<int64_t>()),
                      with_commas(p["dense"].get<int64_t>()));
  const ojson& b = info["bytes"];
  text += fmt::format("bytes       {} of weights ({} NVFP4, {} dense); {} in files\n",
                      human_bytes(b["weights"].get<uint64_t>()), human_bytes(b["nvfp4"].get<uint64_t>()),
                      human_bytes(b["dense"].get<uint64_t>()), human_bytes(b["files"].get<uint64_t>()));
  if (info.contains("checksums")) {
    text += "\nchecksums (sum, sum of |x| of decoded elements)\n";
    for (const auto& file : info["checksums"])
      for (const auto& t : file["tensors"])
        text += fmt::format("  {} {} {:.17g} {:.17g}\n", file["file"].get<std::string>(), t["name"].get<std::string>(),
                            t["sum"].get<double>(), t["abs_sum"].get<double>());
  }
  return text;
}

}  // namespace nvfp4lm
