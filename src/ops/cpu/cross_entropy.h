// CPU reference of ops/cross_entropy.h.
#pragma once

#include "core/tensor.h"
#include "ops/cpu/kernel_family.h"
#include "ops/cross_entropy.h"

namespace nvfp4lm::cpu {

// Rows of target tokens processed per lm_head GEMM (the logits scratch is chunk_rows x V floats).
inline constexpr int64_t kCrossEntropyChunkRows = 64;

CrossEntropyResult lm_head_cross_entropy(const Tensor& hidden, const Tensor& lm_head, const Tensor& targets,
                                         float grad_scale, Tensor* dhidden, Tensor* dweight);
// The softmax row kernel's variants (per x86-64 level, ops/cpu/x86/levels.h) and the one this runs.
const KernelFamilyInfo& cross_entropy_kernel_family();

}  // namespace nvfp4lm::cpu
