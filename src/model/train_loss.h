// The loss heads of Qwen3Trainable (internal to model/): the final hidden state -> loss sum, token count and,
// when asked, dL/d hidden. See qwen3_trainable.h for the definitions of the two losses.
#pragma once

#include <span>
#include <vector>

#include "core/tensor.h"
#include "model/qwen3_block.h"
#include "model/qwen3_trainable.h"

namespace nvfp4lm::detail {

// hidden: [B, T, H] after the final norm; targets: I32 [B, T] on the device. d_hidden ([B, T, H], overwritten)
// and the head's gradient (accumulated, CrossEntropy and distillation only, when the head is trainable) are filled
// when d_hidden is given. quantize_input: fake-quantize hidden before the lm_head (W4A4 with a quantized lm_head),
// with a straight-through gradient. teacher_hidden: [B, T, Ht], the teacher's final hidden state, when
// loss.teacher (the teacher's lm_head is loss.teacher->lm_head_weights()); teacher_top_k, on the model's device, when
// loss.cached_teacher.
// The lm_head's input as the loss reads it: hidden's token rows [B*T, H], fake-quantized (NVFP4, 1x16 blocks) when
// quantize_input. Qwen3Trainable::logits reads the same.
Tensor lm_head_input(const Tensor& hidden, bool quantize_input);

struct LossTeacher {
  const Tensor* hidden = nullptr;
  const TeacherTopK* top_k = nullptr;
};
// batch: its host-side extras (reference_logps for a preference loss; advantages, old_logps and ref_logps for a
// policy-gradient loss).
LossStats loss_head(const TrainLoss& loss, const Tensor& hidden, TrainTensor& head, bool quantize_input,
                    const Tensor& targets, float grad_scale, Tensor* d_hidden, const LossTeacher& teacher,
                    const TrainBatch* batch = nullptr);

// Each row's summed log-probability of its trained targets: input [B * T, H] (lm_head_input's), targets [B * T].
std::vector<double> row_logps(const Tensor& input, const Tensor& lm_head, const Tensor& targets, int64_t row_tokens);

}  // namespace nvfp4lm::detail
