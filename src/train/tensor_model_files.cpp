// See tensor_model_files.h.
#include "train/tensor_model_files.h"

#include <unordered_map>

#include "core/error.h"
#include "io/hf_config.h"

namespace nvfp4lm {
namespace {

class TensorModelFiles final : public ModelFiles {
 public:
  TensorModelFiles(const nlohmann::json& config_json, std::span<const NamedTensor> weights, const std::string& name) {
    path_ = name;
    config_path_ = name;
    config_json_ = config_json;
    config_ = parse_qwen3_config(config_json, name + " (config)");
    std::vector<WeightInfo> found;
    for (const NamedTensor& weight : weights) {
      const Tensor& t = weight.tensor;
      NVFP4LM_CHECK(t.defined() && t.device().is_cpu() &&
                        (t.dtype() == DType::F32 || t.dtype() == DType::BF16 || t.dtype() == DType::F16),
                    "{}: weight '{}' must be a dense F32/BF16/F16 CPU tensor, got {}", name, weight.name,
                    t.defined() ? t.str() : "none");
      WeightInfo info;
      info.name = weight.name;
      info.shape = t.shape();
      info.dtype = t.dtype();
      info.storage = fmt::format("{} (in memory)", dtype_name(t.dtype()));
      info.file_bytes = t.nbytes();
      found.push_back(std::move(info));
      tensors_[weight.name] = t;
    }
    finalize_weights(std::move(found));
  }

  std::vector<fs::path> data_files() const override { return {}; }

  ModelWeight load(const std::string& name) const override {
    at(name);  // Error naming the model when absent
    ModelWeight weight;
    weight.dense = tensors_.at(name);
    return weight;
  }

  void release(const std::string&) const override {}

 private:
  std::unordered_map<std::string, Tensor> tensors_;
};

}  // namespace

std::unique_ptr<ModelFiles> tensor_model_files(const nlohmann::json& config_json, std::span<const NamedTensor> weights,
                                               const std::string& name) {
  return std::make_unique<TensorModelFiles>(config_json, weights, name);
}

}  // namespace nvfp4lm
