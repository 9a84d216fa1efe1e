// Random LoRA adapters in PEFT's files for a base model's config (io/peft_adapter.h), and the base with an adapter
// merged into its weights in double: the reference of the run-time adapters (model/lora_runtime.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "io/peft_adapter.h"
#include "io/weight_names.h"
#include "model/lora.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test {

struct RandomAdapter {
  int rank = 4;
  double alpha = 8;
  std::vector<LoraTarget> targets = {std::begin(kAllLoraTargets), std::end(kAllLoraTargets)};
  std::optional<std::vector<int>> layers;  // layers_to_transform
  bool use_rslora = false;
  uint64_t seed = 1;
  float b_bound = 0.5f;  // B uniform in ±b_bound (A in PEFT's ±1/√in)
  double scale() const { return alpha / (use_rslora ? std::sqrt(static_cast<double>(rank)) : rank); }
};

// The adapter's tensors by PEFT name (F32 CPU).
inline std::map<std::string, Tensor> random_adapter_tensors(const Qwen3Config& config, const RandomAdapter& spec) {
  std::map<std::string, Shape> shapes;
  for (const ExpectedWeight& weight : qwen3_expected_weights(config)) shapes.emplace(weight.name, weight.shape);
  std::map<std::string, Tensor> tensors;
  uint64_t stream = spec.seed * 1000;
  auto random = [&](int64_t rows, int64_t cols, double bound) {
    std::vector<float> values(static_cast<size_t>(rows * cols));
    ++stream;
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<float>(bound * (2.0 * counter_uniform(stream, i) - 1.0));
    return Tensor::from_floats(values, Shape{rows, cols});
  };
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    if (spec.layers && std::find(spec.layers->begin(), spec.layers->end(), layer) == spec.layers->end()) continue;
    for (const LoraTarget target : spec.targets) {
      const std::string base = layer_weight_name(layer, lora_target_weight(target));
      const Shape& shape = shapes.at(base);
      tensors.emplace(lora_a_name(base), random(spec.rank, shape[1], 1.0 / std::sqrt(static_cast<double>(shape[1]))));
      tensors.emplace(lora_b_name(base), random(shape[0], spec.rank, spec.b_bound));
    }
  }
  return tensors;
}

// Writes the adapter to `dir` as PEFT would (adapter_config.json + adapter_model.safetensors).
inline void write_random_adapter(const fs::path& dir, const Qwen3Config& config, const RandomAdapter& spec) {
  std::vector<PeftTensor> tensors;
  for (auto& [name, tensor] : random_adapter_tensors(config, spec)) tensors.push_back({name, tensor});
  PeftLoraConfig peft;
  peft.rank = spec.rank;
  peft.alpha = spec.alpha;
  for (const LoraTarget target : spec.targets) peft.target_modules.emplace_back(lora_target_module(target));
  peft.layers_to_transform = spec.layers;
  write_peft_adapter(dir, peft, tensors, /*overwrite=*/false);
  if (spec.use_rslora) {
    const fs::path file = dir / kPeftConfigFileName;
    nlohmann::json json = nlohmann::json::parse(std::ifstream(file));
    json["use_rslora"] = true;
    std::ofstream(file) << json.dump(2);
  }
}

inline LinearWeight& linear_of(Qwen3LayerWeights& layer, LoraTarget target) {
  switch (target) {
    case LoraTarget::Q:
      return layer.q_proj;
    case LoraTarget::K:
      return layer.k_proj;
    case LoraTarget::V:
      return layer.v_proj;
    case LoraTarget::O:
      return layer.o_proj;
    case LoraTarget::Gate:
      return layer.gate_proj;
    case LoraTarget::Up:
      return layer.up_proj;
    case LoraTarget::Down:
      return layer.down_proj;
  }
  return layer.q_proj;
}

// `base` (dense F32 on the CPU) with W + s·B·A, summed in double and rounded once, for every adapted linear.
inline Qwen3Model merged_model(const Qwen3Model& base, const RandomAdapter& spec) {
  const std::map<std::string, Tensor> tensors = random_adapter_tensors(base.config(), spec);
  Qwen3Weights weights = base.weights();
  for (int64_t layer = 0; layer < base.config().num_hidden_layers; ++layer) {
    for (const LoraTarget target : spec.targets) {
      const std::string name = layer_weight_name(layer, lora_target_weight(target));
      if (!tensors.contains(lora_a_name(name))) continue;
      LinearWeight& linear = linear_of(weights.layers[static_cast<size_t>(layer)], target);
      const Tensor& a = tensors.at(lora_a_name(name));
      const Tensor& b = tensors.at(lora_b_name(name));
      Tensor merged = linear.dense.contiguous().clone();
      float* w = merged.data<float>();
      const int64_t out = merged.dim(0), in = merged.dim(1);
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i) {
          double sum = w[o * in + i];
          for (int64_t r = 0; r < spec.rank; ++r)
            sum += spec.scale() * b.data<float>()[o * spec.rank + r] * a.data<float>()[r * in + i];
          w[o * in + i] = static_cast<float>(sum);
        }
      linear.dense = merged;
    }
  }
  return Qwen3Model(base.config(), weights);
}

}  // namespace nvfp4lm::test
