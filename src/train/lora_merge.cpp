// W' = W + s · B · A per adapted linear (see lora_merge.h).
#include "train/lora_merge.h"

#include <map>

#include "core/error.h"
#include "io/weight_names.h"
#include "model/lora.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {
namespace {

Tensor f32_copy(const Tensor& source) {
  Tensor out = Tensor::empty(source.shape(), DType::F32, Device::cpu());
  convert_cpu(source.to(Device::cpu()), out);
  return out;
}

}  // namespace

MergedModel merge_lora_adapters(const ModelFiles& base, std::span<const NamedTensor> adapters,
                                const TrainOptions& run) {
  NVFP4LM_CHECK(run.lora_rank > 0, "--merge-lora: the run has no LoRA adapters (it trained every weight)");
  const LoraOptions lora = train_lora_options(run);
  const double scale = lora.effective_alpha() / static_cast<double>(lora.rank);
  const int64_t first_adapted = first_adapted_layer(run, base.config().num_hidden_layers);

  std::map<std::string, Tensor> by_name;
  for (const NamedTensor& t : adapters) {
    NVFP4LM_CHECK(t.tensor.dtype() == DType::F32 && t.tensor.rank() == 2, "adapter {} is {}, expected F32 2-D", t.name,
                  t.tensor.str());
    by_name[t.name] = t.tensor;
  }
  MergedModel merged;
  size_t used = 0;
  for (const ExpectedWeight& expected : qwen3_expected_weights(base.config())) {
    const std::optional<LayerWeightName> layer = parse_layer_weight_name(expected.name);
    const bool adapted = layer && layer->layer >= first_adapted && lora.targets_weight(layer->weight);
    const ModelWeight weight = base.load(expected.name);
    const Tensor stored = weight.is_nvfp4() ? dequantize_nvfp4(weight.nvfp4, DType::F32) : weight.dense;
    if (!adapted) {
      merged.masters.push_back(
          {expected.name, stored.dtype() == DType::F32 || stored.dtype() == DType::BF16 ? stored : f32_copy(stored)});
      continue;
    }
    auto find = [&](const std::string& name, const Shape& shape) {
      auto it = by_name.find(name);
      NVFP4LM_CHECK(it != by_name.end(), "the checkpoint's adapters lack {} (the run's --lora-targets {} need it)",
                    name, run.lora_targets);
      NVFP4LM_CHECK(it->second.shape() == shape, "adapter {} is {}, expected {} for {} {}", name,
                    it->second.shape().str(), shape.str(), expected.name, expected.shape.str());
      ++used;
      return it->second.to(Device::cpu()).contiguous();
    };
    const int64_t out = expected.shape[0], in = expected.shape[1], rank = lora.rank;
    const Tensor a = find(lora_a_name(expected.name), Shape{rank, in});
    const Tensor b = find(lora_b_name(expected.name), Shape{out, rank});
    const Tensor w = stored.dtype() == DType::F32 ? stored.contiguous() : f32_copy(stored);
    Tensor result = Tensor::empty(expected.shape, DType::F32, Device::cpu());
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    const float* pw = w.data<float>();
    float* pr = result.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t j = 0; j < in; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < rank; ++k) sum += static_cast<double>(pb[o * rank + k]) * pa[k * in + j];
        pr[o * in + j] = static_cast<float>(static_cast<double>(pw[o * in + j]) + scale * sum);
      }
    }
    merged.masters.push_back({expected.name, result});
    ++merged.merged_linears;
  }
  NVFP4LM_CHECK(used == adapters.size(),
                "the checkpoint has {} adapter tensors, of which {} belong to the run's adapted linears: it is not "
                "this run's",
                adapters.size(), used);
  return merged;
}

}  // namespace nvfp4lm
