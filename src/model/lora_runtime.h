// LoRA adapters at inference: several PEFT adapters (model/lora.h's math, io/peft_adapter.h's files) applied over one
// shared base, each row of a batch with its own adapter or none, so a server answers requests for different adapters
// in one decode step (as vLLM's --lora-modules and llama-server's --lora do).
//
// The adapters of a set are stacked per linear: with R the largest rank of the set rounded up to a multiple of 16 (so
// that on the CPU a row's result does not depend on which other adapters are loaded: lora_runtime.cpp) and n adapters,
//   A_stack [n·R, in]  = A_0; A_1; ... (each padded with zero rows to R)
//   B_stack [out, n·R] = s_0·B_0 | s_1·B_1 | ... (zero columns as padding; s_k = alpha_k / r_k, or / √r_k with rsLoRA)
// and a row that uses adapter k carries the mask row m_k (1 on k's R columns, 0 elsewhere; all 0 for the base):
//   y += ((x · A_stackᵀ) ⊙ m) · B_stackᵀ
// which is the row's own adapter term: the other adapters' columns are multiplied by exact zeros, and adding zero
// products leaves a float sum unchanged. The masks live in a device tensor, so a captured CUDA graph serves any mix of
// adapters (model/qwen3_decode_step.h). A linear no adapter of the set targets (or a layer outside every adapter's
// layers_to_transform) has no stack and costs nothing; the others cost two thin GEMMs, a product and an add per linear.
// For two rank-16 adapters on every linear of Qwen3-4B a decode step reads 3.7 MB of BF16 stacks per layer beside the
// 57 MB of NVFP4 weights (+6.5 %) and launches 28 more kernels per layer, which at the 3–4 µs a small kernel takes in
// a decode graph about doubles a batch-1 step (predicted, not measured: bench/NOTES.md 2026-11-29).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/files.h"
#include "core/tensor.h"
#include "io/hf_config.h"
#include "io/peft_adapter.h"
#include "model/lora.h"

namespace nvfp4lm {

// The base model's rows (no adapter).
inline constexpr int kNoLoraAdapter = -1;

// `--lora NAME=DIR` (or `--lora DIR`: the directory's name).
struct LoraAdapterSpec {
  std::string name;
  fs::path dir;
};
// Error naming the flag's text when NAME is empty or DIR is missing.
LoraAdapterSpec parse_lora_adapter_spec(std::string_view text);

// One linear's stacked adapters, in the compute dtype on the model's device (undefined: no adapter of the set has it).
struct LoraStack {
  Tensor a;  // [n·R, in]
  Tensor b;  // [out, n·R], scaled
  bool defined() const { return a.defined(); }
};

class LoraAdapterSet {
 public:
  // Reads every adapter (io/peft_adapter.h) and checks it against the base's config: its target modules are Qwen3
  // linears, its layers exist, every tensor it should have is there with its shape ([r, in], [out, r]) and nothing
  // else is. Errors name the adapter, its file and the tensor. Names must be distinct.
  static LoraAdapterSet load(std::span<const LoraAdapterSpec> specs, const Qwen3Config& config, DType compute,
                             Device device);
  // The same checks and stacks from adapters already in memory, as (name, adapter): the trainer's own, for the
  // rollouts of a LoRA GRPO run (Qwen3Trainable::inference_model). Their tensors may be on any device.
  static LoraAdapterSet build(std::vector<std::pair<std::string, PeftAdapter>> adapters, const Qwen3Config& config,
                              DType compute, Device device);

  int count() const { return static_cast<int>(names_.size()); }
  const std::string& name(int adapter) const { return names_.at(static_cast<size_t>(adapter)); }
  // The adapter's index, or kNoLoraAdapter when no adapter has that name.
  int find(std::string_view name) const;
  // n·R: the columns of every stack and of a mask row.
  int64_t width() const { return width_; }
  // The stack of `target` in `layer` (possibly undefined).
  const LoraStack& stack(int64_t layer, LoraTarget target) const;
  // Writes adapter's mask row (width() values: 1 on its columns, 0 elsewhere; all 0 for kNoLoraAdapter).
  void mask_row(int adapter, std::span<float> row) const;
  // "support (rank 16, alpha 32, scale 2, q,k,v,o,gate,up,down in 36 of 36 layers), ..."
  std::string describe() const;
  uint64_t bytes() const;

 private:
  std::vector<std::string> names_;
  std::vector<std::string> descriptions_;
  int64_t rank_stride_ = 0;  // R
  int64_t width_ = 0;
  std::vector<std::array<LoraStack, std::size(kAllLoraTargets)>> layers_;
};

}  // namespace nvfp4lm
