// ModelFiles for Hugging Face, ModelOpt NVFP4 and compressed-tensors NVFP4 directories (all safetensors
// underneath). In a ModelOpt directory a "<prefix>.weight" with a "<prefix>.weight_scale" beside it is an NVFP4
// weight; in a compressed-tensors one a "<prefix>.weight_packed" is the NVFP4 weight "<prefix>.weight". Their scale
// tensors are folded into the weight and not listed separately. KV-cache scales (k_scale, v_scale) are listed as
// extra tensors.
#include <algorithm>

#include "core/error.h"
#include "core/logging.h"
#include "io/compressed_tensors.h"
#include "io/model_files_impl.h"
#include "io/modelopt.h"
#include "io/safetensors_reader.h"

namespace nvfp4lm::detail {
namespace {

class SafetensorsModelFiles : public ModelFilesBase {
 public:
  explicit SafetensorsModelFiles(const ModelLocation& location)
      : ModelFilesBase(location), set_(SafetensorsSet::open_dir(location.directory)) {
    const bool modelopt = format_ == ModelFormat::ModeloptNvfp4;
    const bool compressed = format_ == ModelFormat::CompressedTensorsNvfp4;
    if (compressed) {
      const CompressedTensorsConfig quant = parse_compressed_tensors_config(
          config_json_.at("quantization_config"), config_path_.string() + ": quantization_config");
      log::debug("{}: compressed-tensors {} checkpoint", path_.string(), quant.w4a4 ? "NVFP4 (W4A4)" : "NVFP4A16");
    }
    if (modelopt) {
      const fs::path quant_config = directory_ / "hf_quant_config.json";
      if (fs::exists(quant_config)) {
        const ModeloptQuantConfig quant = load_hf_quant_config(quant_config);
        if (quant.kv_cache_quant_algo)
          log::warn("{}: KV-cache quantization ({}) is not used; KV caches stay in BF16", quant_config.string(),
                    *quant.kv_cache_quant_algo);
      }
    }
    std::vector<WeightInfo> found;
    for (const auto& name : set_.names()) {
      if (compressed) {
        if (const auto weight = compressed_tensors_weight_of_packed(name)) {
          found.push_back(compressed_tensors_info(*weight));
          continue;
        }
        if (compressed_tensors_part_of_quantized(set_, name)) continue;
      }
      if (modelopt && is_scale_of_quantized_weight(name)) continue;
      const auto location_of = set_.at(name);
      const SafetensorsEntry& entry = *location_of.entry;
      WeightInfo info;
      info.name = name;
      if (modelopt && std::string_view(name).ends_with(".weight") && modelopt_is_quantized(set_, name)) {
        NVFP4LM_CHECK(entry.shape.rank() == 2, "{}: quantized weight '{}' must be [out, in/2], got {}",
                      location_of.file->path().string(), name, entry.shape.str());
        info.nvfp4 = true;
        info.shape = Shape{entry.shape[0], entry.shape[1] * 2};
        info.dtype = DType::E2M1x2;
        info.storage = "NVFP4 (E2M1 codes, E4M3 block scales, F32 tensor scale)";
        info.file_bytes = modelopt_weight_file_bytes(set_, name);
      } else {
        info.shape = entry.shape;
        info.dtype = entry.dtype;
        info.storage = std::string(dtype_name(entry.dtype));
        info.file_bytes = entry.bytes;
      }
      found.push_back(std::move(info));
    }
    finalize_weights(std::move(found));
  }

  std::vector<fs::path> data_files() const override {
    std::vector<fs::path> files;
    for (const auto& file : set_.files()) files.push_back(file->path());
    return files;
  }

  ModelWeight load(const std::string& name) const override {
    const WeightInfo& info = at(name);
    ModelWeight weight;
    if (info.nvfp4 && format_ == ModelFormat::CompressedTensorsNvfp4) {
      weight.nvfp4 = read_compressed_tensors_weight(set_, name);
      weight.input_scale = read_compressed_tensors_input_scale(set_, name);
    } else if (info.nvfp4) {
      weight.nvfp4 = read_modelopt_weight(set_, name);
      weight.input_scale = read_modelopt_input_scale(set_, name);
    } else
      weight.dense = set_.tensor(name);
    return weight;
  }

  void release(const std::string& name) const override {
    const WeightInfo& info = at(name);
    if (info.nvfp4 && format_ == ModelFormat::CompressedTensorsNvfp4)
      drop_compressed_tensors_weight_pages(set_, name);
    else if (info.nvfp4)
      drop_modelopt_weight_pages(set_, name);
    else
      set_.drop_pages(name);
  }

 private:
  // The listing of compressed-tensors' "<prefix>.weight_packed" as the NVFP4 weight "<prefix>.weight".
  WeightInfo compressed_tensors_info(const std::string& weight_name) const {
    const auto packed = set_.at(compressed_tensors_names(weight_name).weight_packed);
    NVFP4LM_CHECK(packed.entry->shape.rank() == 2, "{}: quantized weight '{}' must be [out, in/2], got {}",
                  packed.file->path().string(), weight_name, packed.entry->shape.str());
    WeightInfo info;
    info.name = weight_name;
    info.nvfp4 = true;
    info.shape = Shape{packed.entry->shape[0], packed.entry->shape[1] * 2};
    info.dtype = DType::E2M1x2;
    info.storage = "NVFP4 (compressed-tensors: E2M1 codes, E4M3 block scales, F32 global scale)";
    info.file_bytes = compressed_tensors_weight_file_bytes(set_, weight_name);
    return info;
  }

  // weight_scale / weight_scale_2 / input_scale of a "<prefix>.weight" that is quantized.
  bool is_scale_of_quantized_weight(const std::string& name) const {
    for (std::string_view suffix : {".weight_scale", ".weight_scale_2", ".input_scale"}) {
      if (!std::string_view(name).ends_with(suffix)) continue;
      const std::string weight = name.substr(0, name.size() - suffix.size()) + ".weight";
      if (set_.contains(weight) && set_.contains(modelopt_names(weight).weight_scale)) return true;
    }
    return false;
  }

  SafetensorsSet set_;
};

}  // namespace

std::unique_ptr<ModelFiles> open_safetensors_model(const ModelLocation& location) {
  return std::make_unique<SafetensorsModelFiles>(location);
}

}  // namespace nvfp4lm::detail
