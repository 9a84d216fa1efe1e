// CPU reference of ops/distillation.h.
#pragma once

#include "core/tensor.h"
#include "ops/distillation.h"

namespace nvfp4lm::cpu {

// Rows of target tokens processed per pair of lm_head GEMMs (the logits scratch is 2 x chunk_rows x V floats).
inline constexpr int64_t kDistillationChunkRows = 64;

DistillationResult lm_head_distillation(const Tensor& hidden, const Tensor& lm_head, const Tensor& teacher_hidden,
                                        const Tensor& teacher_lm_head, const Tensor& targets,
                                        const DistillationSettings& settings, float grad_scale, Tensor* dhidden,
                                        Tensor* dweight);
DistillationResult lm_head_distillation_topk(const Tensor& hidden, const Tensor& lm_head, const TeacherTopK& teacher,
                                             const Tensor& targets, const DistillationSettings& settings,
                                             float grad_scale, Tensor* dhidden, Tensor* dweight);

// ops/distillation.h select_teacher_top_k, checked there.
TeacherTopK select_teacher_top_k(const Tensor& logits, int64_t k, float temperature);

}  // namespace nvfp4lm::cpu
