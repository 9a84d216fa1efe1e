// Parameter: what the model hands to the optimizer, the gradient-norm code and the checkpoint writer.
//
// Conventions:
//  - `name` is the Hugging Face tensor name ("model.layers.0.self_attn.q_proj.weight"). Optimizer state and
//    checkpoint entries are keyed by it, so the order of a parameter list may change between runs.
//  - `value` is the master weight: F32, or BF16 when the run keeps bf16 masters (the optimizer then writes
//    it back with stochastic rounding). `grad` is F32 with the same shape. Both contiguous, on one device
//    (CPU: the fp32 reference optimizers; CUDA: their kernels, cuda/optim_kernels.h).
//  - The backward pass *accumulates* into `grad` (+=); the training loop zeroes it after each optimizer step.
//  - `weight_decay` is true for 2-D linear weights, false for embeddings and norm weights.
//  - The model owns the parameters; optimizers and checkpoints take them as a span each call and keep
//    no pointers.
#pragma once

#include <span>
#include <string>

#include "core/tensor.h"

namespace nvfp4lm {

struct Parameter {
  std::string name;
  Tensor value;  // master weight, F32 or BF16
  Tensor grad;   // F32, same shape as value
  bool weight_decay = false;
};

// A named tensor (a view): checkpoints write these and load into them in place.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Checks the conventions above (internal invariants: the model builds parameters, not the user).
void check_parameter(const Parameter& parameter);

// Checks every parameter and that no name appears twice.
void check_parameters(std::span<const Parameter> parameters);

}  // namespace nvfp4lm
