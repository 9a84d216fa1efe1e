// LoRA adapters: targets, PEFT names, initialisation and the adapter's forward / backward, written with ops/gemm.h
// so every backend that has gemm runs them (see lora.h for the math).
#include "model/lora.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/error.h"
#include "core/rng.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"

namespace nvfp4lm {
namespace {

// A weight name's module: "model.layers.0.self_attn.q_proj.weight" -> "model.layers.0.self_attn.q_proj".
std::string_view module_of(std::string_view weight_name) {
  constexpr std::string_view kSuffix = ".weight";
  NVFP4LM_ASSERT(weight_name.size() > kSuffix.size() && weight_name.ends_with(kSuffix),
                 "a LoRA base weight name ends with .weight, got {}", weight_name);
  return weight_name.substr(0, weight_name.size() - kSuffix.size());
}

}  // namespace

namespace {

struct TargetInfo {
  std::string_view module;  // PEFT's target_modules name
  LayerWeight weight;
};
// In LoraTarget's order.
constexpr TargetInfo kTargetInfo[] = {{"q_proj", LayerWeight::QProj},       {"k_proj", LayerWeight::KProj},
                                      {"v_proj", LayerWeight::VProj},       {"o_proj", LayerWeight::OProj},
                                      {"gate_proj", LayerWeight::GateProj}, {"up_proj", LayerWeight::UpProj},
                                      {"down_proj", LayerWeight::DownProj}};
static_assert(std::size(kTargetInfo) == std::size(kAllLoraTargets));

const TargetInfo& target_info(LoraTarget target) { return kTargetInfo[static_cast<size_t>(target)]; }

}  // namespace

std::string_view lora_target_module(LoraTarget target) { return target_info(target).module; }

LayerWeight lora_target_weight(LoraTarget target) { return target_info(target).weight; }

std::vector<LoraTarget> parse_lora_targets(std::string_view list) {
  std::vector<LoraTarget> targets;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    std::string_view entry = list.substr(start, comma - start);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    start = comma + 1;
    if (entry.empty()) continue;
    if (entry == "all" || entry == "all-linear") {
      targets.assign(std::begin(kAllLoraTargets), std::end(kAllLoraTargets));
      continue;
    }
    bool found = false;
    for (const LoraTarget target : kAllLoraTargets) {
      const std::string_view module = lora_target_module(target);
      if (entry == module || entry == module.substr(0, module.size() - std::string_view("_proj").size())) {
        if (std::find(targets.begin(), targets.end(), target) == targets.end()) targets.push_back(target);
        found = true;
      }
    }
    NVFP4LM_CHECK(found, "--lora-targets: unknown linear '{}' (choose from q, k, v, o, gate, up, down, or all)", entry);
  }
  NVFP4LM_CHECK(!targets.empty(), "--lora-targets names no linear (choose from q, k, v, o, gate, up, down, or all)");
  std::sort(targets.begin(), targets.end());
  return targets;
}

std::string lora_targets_text(const std::vector<LoraTarget>& targets) {
  std::string text;
  for (const LoraTarget target : targets) {
    if (!text.empty()) text += ',';
    const std::string_view module = lora_target_module(target);
    text += module.substr(0, module.size() - std::string_view("_proj").size());
  }
  return text;
}

bool LoraOptions::targets_weight(LayerWeight weight) const {
  return enabled() && std::any_of(targets.begin(), targets.end(),
                                  [&](LoraTarget target) { return lora_target_weight(target) == weight; });
}

std::string lora_a_name(std::string_view weight_name) {
  return "base_model.model." + std::string(module_of(weight_name)) + ".lora_A.weight";
}

std::string lora_b_name(std::string_view weight_name) {
  return "base_model.model." + std::string(module_of(weight_name)) + ".lora_B.weight";
}

LoraAdapter make_lora_adapter(const std::string& base_name, int64_t out, int64_t in, const LoraOptions& options,
                              DType compute, Device device) {
  NVFP4LM_ASSERT(options.enabled() && out > 0 && in > 0, "make_lora_adapter({}, {}, {}) with rank {}", base_name, out,
                 in, options.rank);
  const int64_t rank = options.rank;
  LoraAdapter adapter;
  adapter.base_name = base_name;
  adapter.scale = options.scale();
  adapter.dropout = static_cast<float>(options.dropout);
  adapter.mask_salt = mix64(name_hash(base_name));
  // PEFT's default A: kaiming_uniform_(a = √5) = uniform(±√(6 / ((1 + 5) · in))) = uniform(±1 / √in).
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  const uint64_t stream = mix64(options.seed ^ name_hash(base_name));
  std::vector<float> a(static_cast<size_t>(rank * in));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(bound * (2.0 * counter_uniform(stream, i) - 1.0));
  adapter.a = Tensor::from_floats(a, Shape{rank, in}).to(device);
  adapter.b = Tensor::zeros(Shape{out, rank}, DType::F32, device);
  adapter.grad_a = Tensor::zeros(adapter.a.shape(), DType::F32, device);
  adapter.grad_b = Tensor::zeros(adapter.b.shape(), DType::F32, device);
  adapter.a_use = compute == DType::F32 ? adapter.a : Tensor::empty(adapter.a.shape(), compute, device);
  adapter.b_use = compute == DType::F32 ? adapter.b : Tensor::empty(adapter.b.shape(), compute, device);
  refresh_lora_adapter(adapter);
  return adapter;
}

void refresh_lora_adapter(LoraAdapter& adapter) {
  if (adapter.a_use.raw() != adapter.a.raw()) cast(adapter.a, adapter.a_use);
  if (adapter.b_use.raw() != adapter.b.raw()) cast(adapter.b, adapter.b_use);
}

namespace {

// drop(x) for this pass, or x itself without dropout.
Tensor dropped_input(const LoraAdapter& adapter, const Tensor& x, const LoraPass& pass) {
  if (!pass.dropout || adapter.dropout <= 0.f) return x;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  dropout(x, out, adapter.dropout, mix64(pass.dropout_seed ^ adapter.mask_salt));
  return out;
}

}  // namespace

void lora_forward(const LoraAdapter& adapter, const Tensor& x, Tensor& y, const LoraPass& pass) {
  const Tensor input = dropped_input(adapter, x, pass);
  Tensor xa = Tensor::empty({x.dim(0), adapter.rank()}, x.dtype(), x.device());
  gemm(input, false, adapter.a_use, true, xa);
  gemm(xa, false, adapter.b_use, true, y, adapter.scale, 1.f);
}

void lora_backward(LoraAdapter& adapter, const Tensor& x, const Tensor& dy, Tensor& dx, const LoraPass& pass) {
  const int64_t rows = x.dim(0), rank = adapter.rank();
  const Tensor input = dropped_input(adapter, x, pass);
  Tensor xa = Tensor::empty({rows, rank}, x.dtype(), x.device());
  gemm(input, false, adapter.a_use, true, xa);
  Tensor t = Tensor::empty({rows, rank}, x.dtype(), x.device());
  gemm(dy, false, adapter.b_use, false, t);
  if (input.raw() == x.raw()) {
    gemm(t, false, adapter.a_use, false, dx, adapter.scale, 1.f);
  } else {
    // dx += drop(s · t · A): the forward's mask applied to the gradient of drop(x).
    Tensor d_input = Tensor::empty(x.shape(), x.dtype(), x.device());
    gemm(t, false, adapter.a_use, false, d_input, adapter.scale, 0.f);
    dropout(d_input, dx, adapter.dropout, mix64(pass.dropout_seed ^ adapter.mask_salt), /*accumulate=*/true);
  }
  gemm(dy, true, xa, false, adapter.grad_b, adapter.scale, 1.f);
  gemm(t, true, input, false, adapter.grad_a, adapter.scale, 1.f);
}

}  // namespace nvfp4lm
