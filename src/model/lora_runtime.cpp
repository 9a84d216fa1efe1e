// Loading PEFT adapters for inference and stacking them per linear (see lora_runtime.h).
#include "model/lora_runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "io/peft_adapter.h"
#include "io/weight_names.h"
#include "ops/elementwise.h"

namespace nvfp4lm {
namespace {

constexpr int64_t kRankBlock = 16;

// The Qwen3 linears a PEFT target_modules entry names: one for "q_proj" or a dotted suffix such as
// "self_attn.q_proj", every one for "all-linear".
std::vector<LoraTarget> targets_of(const std::string& module, const PeftAdapter& adapter) {
  if (module == "all-linear") return {std::begin(kAllLoraTargets), std::end(kAllLoraTargets)};
  for (const LoraTarget target : kAllLoraTargets) {
    const std::string_view name = lora_target_module(target);
    if (module == name || (module.size() > name.size() && std::string_view(module).ends_with(name) &&
                           module[module.size() - name.size() - 1] == '.'))
      return {target};
  }
  throw Error(
      fmt::format("LoRA adapter {}: target module '{}' is not one of Qwen3's decoder linears (q_proj, k_proj, "
                  "v_proj, o_proj, gate_proj, up_proj, down_proj)",
                  adapter.dir.string(), module));
}

// [out, in] of a layer's linear, from the config's expected weights.
Shape linear_shape(const std::map<std::string, Shape>& shapes, const std::string& weight_name) {
  const auto it = shapes.find(weight_name);
  NVFP4LM_ASSERT(it != shapes.end(), "no expected weight {}", weight_name);
  return it->second;
}

// The adapter's tensor `name` with `shape`, taken out of `tensors` (what is left at the end was not expected).
Tensor take_tensor(PeftAdapter& adapter, const std::string& name, const Shape& shape) {
  const auto it = adapter.tensors.find(name);
  NVFP4LM_CHECK(it != adapter.tensors.end(),
                "LoRA adapter {}: {} has no tensor {} (its adapter_config.json targets this linear)",
                adapter.dir.string(), kPeftWeightsFileName, name);
  NVFP4LM_CHECK(it->second.shape() == shape, "LoRA adapter {}: {} is {}, expected {} for this base model",
                adapter.dir.string(), name, it->second.shape().str(), shape.str());
  Tensor tensor = std::move(it->second);
  adapter.tensors.erase(it);
  return tensor;
}

}  // namespace

LoraAdapterSpec parse_lora_adapter_spec(std::string_view text) {
  const size_t equals = text.find('=');
  LoraAdapterSpec spec;
  if (equals == std::string_view::npos) {
    spec.dir = fs::path(std::string(text));
    spec.name = spec.dir.lexically_normal().filename().string();
    if (spec.name.empty()) spec.name = spec.dir.lexically_normal().parent_path().filename().string();
  } else {
    spec.name = std::string(text.substr(0, equals));
    spec.dir = fs::path(std::string(text.substr(equals + 1)));
  }
  NVFP4LM_CHECK(!spec.name.empty() && !spec.dir.empty(),
                "--lora '{}': expected NAME=DIR (an adapter's name and its PEFT directory) or DIR", text);
  return spec;
}

LoraAdapterSet LoraAdapterSet::load(std::span<const LoraAdapterSpec> specs, const Qwen3Config& config, DType compute,
                                    Device device) {
  NVFP4LM_ASSERT(!specs.empty(), "LoraAdapterSet::load without adapters");
  std::vector<std::pair<std::string, PeftAdapter>> adapters;
  std::set<std::string> names;
  for (const LoraAdapterSpec& spec : specs) {
    NVFP4LM_CHECK(names.insert(spec.name).second, "--lora: two adapters are named '{}' (give each its own NAME=DIR)",
                  spec.name);
    adapters.emplace_back(spec.name, read_peft_adapter(spec.dir));
  }
  return build(std::move(adapters), config, compute, device);
}

LoraAdapterSet LoraAdapterSet::build(std::vector<std::pair<std::string, PeftAdapter>> named, const Qwen3Config& config,
                                     DType compute, Device device) {
  NVFP4LM_ASSERT(!named.empty(), "LoraAdapterSet::build without adapters");
  std::map<std::string, Shape> shapes;
  for (const ExpectedWeight& weight : qwen3_expected_weights(config)) shapes.emplace(weight.name, weight.shape);

  std::vector<PeftAdapter> adapters;
  LoraAdapterSet set;
  for (auto& [name, adapter] : named) {
    NVFP4LM_CHECK(std::find(set.names_.begin(), set.names_.end(), name) == set.names_.end(),
                  "--lora: two adapters are named '{}' (give each its own NAME=DIR)", name);
    adapters.push_back(std::move(adapter));
    set.names_.push_back(name);
    set.rank_stride_ = std::max<int64_t>(set.rank_stride_, adapters.back().config.rank);
  }
  // R rounded up to whole 16-column blocks: each adapter's columns then sit at the same offsets within the CPU dot
  // kernels' vector lanes (ops/cpu/dense_dot.h) whichever adapters come with it, and a row's result is bit for bit
  // the one it gets from a set of its adapter alone (the other columns add exact zeros).
  set.rank_stride_ = (set.rank_stride_ + kRankBlock - 1) / kRankBlock * kRankBlock;
  const auto n = static_cast<int64_t>(adapters.size()), layers = config.num_hidden_layers;
  set.width_ = n * set.rank_stride_;

  // Host F32 stacks, filled adapter by adapter, then moved to the device in the compute dtype.
  struct HostStack {
    Tensor a, b;
  };
  std::vector<std::array<HostStack, std::size(kAllLoraTargets)>> host(static_cast<size_t>(layers));
  for (int64_t k = 0; k < n; ++k) {
    PeftAdapter& adapter = adapters[static_cast<size_t>(k)];
    const int64_t rank = adapter.config.rank;
    const auto scale = static_cast<float>(adapter.scale());
    std::vector<LoraTarget> targets;
    for (const std::string& module : adapter.config.target_modules)
      for (const LoraTarget target : targets_of(module, adapter))
        if (std::find(targets.begin(), targets.end(), target) == targets.end()) targets.push_back(target);
    std::sort(targets.begin(), targets.end());
    std::vector<int64_t> adapted_layers;
    if (adapter.config.layers_to_transform) {
      for (const int layer : *adapter.config.layers_to_transform) {
        NVFP4LM_CHECK(layer < layers, "LoRA adapter {}: layers_to_transform names layer {}; the base has {} layers",
                      adapter.dir.string(), layer, layers);
        adapted_layers.push_back(layer);
      }
    } else {
      for (int64_t layer = 0; layer < layers; ++layer) adapted_layers.push_back(layer);
    }
    for (const int64_t layer : adapted_layers) {
      for (const LoraTarget target : targets) {
        const std::string base = layer_weight_name(layer, lora_target_weight(target));
        const Shape shape = linear_shape(shapes, base);
        const int64_t out = shape[0], in = shape[1];
        const Tensor a = take_tensor(adapter, lora_a_name(base), Shape{rank, in});
        const Tensor b = take_tensor(adapter, lora_b_name(base), Shape{out, rank});
        HostStack& stack = host[static_cast<size_t>(layer)][static_cast<size_t>(target)];
        if (!stack.a.defined()) {
          stack.a = Tensor::zeros({set.width_, in}, DType::F32);
          stack.b = Tensor::zeros({out, set.width_}, DType::F32);
        }
        Tensor a_rows = stack.a.narrow(0, k * set.rank_stride_, rank);
        a_rows.copy_from(a);
        Tensor b_columns = Tensor::empty({out, rank}, DType::F32);
        b_columns.copy_from(b);
        scale_inplace(b_columns, scale);
        // Column block k of B_stack, row by row (a column narrow of a row-major tensor is a row-strided view).
        Tensor b_block = stack.b.narrow(1, k * set.rank_stride_, rank);
        b_block.copy_from(b_columns);
      }
    }
    NVFP4LM_CHECK(adapter.tensors.empty(),
                  "LoRA adapter {}: {} holds {} tensors its adapter_config.json does not explain, such as {} (nvfp4lm "
                  "applies lora_A / lora_B pairs of the target modules only)",
                  adapter.dir.string(), kPeftWeightsFileName, adapter.tensors.size(), adapter.tensors.begin()->first);
    set.descriptions_.push_back(fmt::format("{} (rank {}, alpha {}, scale {}{}, {} in {} of {} layers)",
                                            set.names_[static_cast<size_t>(k)], rank, adapter.config.alpha, scale,
                                            adapter.use_rslora ? " rsLoRA" : "", lora_targets_text(targets),
                                            adapted_layers.size(), layers));
  }

  set.layers_.resize(static_cast<size_t>(layers));
  for (int64_t layer = 0; layer < layers; ++layer) {
    for (size_t t = 0; t < std::size(kAllLoraTargets); ++t) {
      const HostStack& from = host[static_cast<size_t>(layer)][t];
      if (!from.a.defined()) continue;
      LoraStack& to = set.layers_[static_cast<size_t>(layer)][t];
      for (const auto& [src, dst] : {std::pair{&from.a, &to.a}, std::pair{&from.b, &to.b}}) {
        Tensor narrow = Tensor::empty(src->shape(), compute);
        cast(*src, narrow);
        *dst = narrow.to(device);
      }
    }
  }
  return set;
}

int LoraAdapterSet::find(std::string_view name) const {
  for (size_t k = 0; k < names_.size(); ++k)
    if (names_[k] == name) return static_cast<int>(k);
  return kNoLoraAdapter;
}

const LoraStack& LoraAdapterSet::stack(int64_t layer, LoraTarget target) const {
  return layers_.at(static_cast<size_t>(layer))[static_cast<size_t>(target)];
}

void LoraAdapterSet::mask_row(int adapter, std::span<float> row) const {
  NVFP4LM_ASSERT(static_cast<int64_t>(row.size()) == width_ && adapter >= kNoLoraAdapter && adapter < count(),
                 "mask_row({}) into {} values of {}", adapter, row.size(), width_);
  std::fill(row.begin(), row.end(), 0.f);
  if (adapter == kNoLoraAdapter) return;
  std::fill_n(row.begin() + adapter * rank_stride_, rank_stride_, 1.f);
}

std::string LoraAdapterSet::describe() const {
  std::string text;
  for (const std::string& description : descriptions_) text += (text.empty() ? "" : ", ") + description;
  return text;
}

uint64_t LoraAdapterSet::bytes() const {
  uint64_t total = 0;
  for (const auto& layer : layers_)
    for (const LoraStack& stack : layer)
      if (stack.defined()) total += stack.a.nbytes() + stack.b.nbytes();
  return total;
}

}  // namespace nvfp4lm
