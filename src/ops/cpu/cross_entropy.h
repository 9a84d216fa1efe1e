// CPU reference of ops/cross_entropy.h.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ops/cpu/kernel_family.h"
#include "ops/cpu/views.h"
#include "ops/cross_entropy.h"

namespace nvfp4lm::cpu {

// Rows of target tokens processed per lm_head GEMM (the logits scratch is chunk_rows x V floats).
inline constexpr int64_t kCrossEntropyChunkRows = 64;

// The rows of a fused lm_head loss (this one, ops/cpu/distillation.h) that have a target, in order; Error naming
// `loss` for a target outside [0, vocab) other than kIgnoreIndex (it comes from data). With dhidden, the ignored rows
// are zeroed there.
std::vector<int64_t> active_target_rows(const int32_t* target, int64_t rows, int64_t vocab, const MatrixF32* dhidden,
                                        const char* loss);

// Rows index[0..count) of `from` into the first `count` rows of the contiguous F32 `to` (a chunk of target rows).
void gather_target_rows(const MatrixF32& from, const int64_t* index, int64_t count, Tensor& to);

CrossEntropyResult lm_head_cross_entropy(const Tensor& hidden, const Tensor& lm_head, const Tensor& targets,
                                         float grad_scale, Tensor* dhidden, Tensor* dweight,
                                         const CrossEntropyTokens& tokens = {});
// The softmax row kernel's variants (per x86-64 level, ops/cpu/x86/levels.h) and the one this runs.
const KernelFamilyInfo& cross_entropy_kernel_family();

}  // namespace nvfp4lm::cpu
