// LoRA adapters (low-rank adaptation, Hu et al. 2021) on the decoder's linears, as Hugging Face PEFT defines them:
//   y = x · Wᵀ + s · (x · Aᵀ) · Bᵀ,   A [r, in], B [out, r], s = alpha / r
// W is the frozen base weight (whatever the forward reads: NVFP4 dequantized block by block, or dense); only A and B
// train. A starts as PEFT's default (kaiming-uniform with a = √5: uniform in ±1/√in), B as zeros, so a new adapter
// changes nothing. Backward (the base's input gradient is the caller's):
//   t = dy · B [N, r];  dx += s · t · A;  dB += s · dyᵀ · (x · Aᵀ);  dA += s · tᵀ · x
// x · Aᵀ is recomputed in the backward instead of saved: r / out of the base GEMM's work (under 1 % at r = 16 on
// Qwen3-4B), and nothing per adapter stays in memory between the passes.
//
// Dropout (PEFT's lora_dropout, training only): the adapter reads drop(x) instead of x, the inverted dropout of
// ops/elementwise.h with a mask seeded per adapter and per forward (LoraPass::dropout_seed); the backward regenerates
// that mask, so nothing is stored: dA += s · tᵀ · drop(x) and dx += drop(s · t · A).
//
// Names are PEFT's (adapter_model.safetensors): "base_model.model.<module>.lora_A.weight" for the base weight
// "<module>.weight"; checkpoints and the optimizer use them too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "io/weight_names.h"

namespace nvfp4lm {

// The linears an adapter may sit on (PEFT's target_modules names for Qwen3).
enum class LoraTarget { Q, K, V, O, Gate, Up, Down };
inline constexpr LoraTarget kAllLoraTargets[] = {LoraTarget::Q,    LoraTarget::K,  LoraTarget::V,   LoraTarget::O,
                                                 LoraTarget::Gate, LoraTarget::Up, LoraTarget::Down};
std::string_view lora_target_module(LoraTarget target);  // "q_proj", ..., "down_proj"
LayerWeight lora_target_weight(LoraTarget target);
// "q,k,v,o,gate,up,down" (either spelling: "q" or "q_proj"; "all" for every one) -> the targets in canonical order.
// Error naming the unknown entry and the choices.
std::vector<LoraTarget> parse_lora_targets(std::string_view list);
std::string lora_targets_text(const std::vector<LoraTarget>& targets);  // "q,k,v,o,gate,up,down"

struct LoraOptions {
  int rank = 0;      // 0: no adapters (full-parameter training)
  double alpha = 0;  // 0: the rank (s = 1)
  std::vector<LoraTarget> targets = {std::begin(kAllLoraTargets), std::end(kAllLoraTargets)};
  double dropout = 0;  // [0, 1): PEFT's lora_dropout
  uint64_t seed = 0;   // A's initialisation
  bool enabled() const { return rank > 0; }
  double effective_alpha() const { return alpha > 0 ? alpha : static_cast<double>(rank); }
  float scale() const { return static_cast<float>(effective_alpha() / static_cast<double>(rank)); }
  bool targets_weight(LayerWeight weight) const;
};

// PEFT's tensor names for the adapter of base weight `weight_name` ("model.layers.0.self_attn.q_proj.weight").
std::string lora_a_name(std::string_view weight_name);
std::string lora_b_name(std::string_view weight_name);

// One adapter: F32 masters and gradients; `a_use` / `b_use` are what the forward reads (the masters themselves in an
// F32 computation, BF16 copies refreshed after each update on CUDA).
struct LoraAdapter {
  std::string base_name;  // the base weight's HF name
  Tensor a, b;            // [r, in], [out, r] F32
  Tensor grad_a, grad_b;  // F32, accumulated
  Tensor a_use, b_use;    // compute dtype
  float scale = 1;
  float dropout = 0;
  uint64_t mask_salt = 0;  // mixed into each pass's dropout seed: every adapter draws its own mask
  int64_t rank() const { return a.dim(0); }
};

// One pass's dropout: a training forward / backward gives the seed of its batch (the same in both, and in a recomputed
// forward); evaluation passes none (no dropout).
struct LoraPass {
  bool dropout = false;
  uint64_t dropout_seed = 0;
};

// A new adapter for a base weight of shape [out, in] on `device`: A drawn from `seed` and the base name (the same
// adapter whatever the order of creation), B zero; grads zero; uses in `compute`.
LoraAdapter make_lora_adapter(const std::string& base_name, int64_t out, int64_t in, const LoraOptions& options,
                              DType compute, Device device);
// a_use / b_use from the masters (after an update or after loading them).
void refresh_lora_adapter(LoraAdapter& adapter);

// y [N, out] += s · (drop(x) [N, in] · Aᵀ) · Bᵀ.
void lora_forward(const LoraAdapter& adapter, const Tensor& x, Tensor& y, const LoraPass& pass = {});
// The backward above (`pass` the forward's): dx [N, in] += the adapter's part; grads accumulate.
void lora_backward(LoraAdapter& adapter, const Tensor& x, const Tensor& dy, Tensor& dx, const LoraPass& pass = {});

}  // namespace nvfp4lm
