// GRPO's KL term (`--beta` > 0 with --objective grpo; TRL's GRPOConfig.beta, default 0): each completion token's
// log-probability under the reference — the policy the run started from, frozen — for the loss's k3 estimate of
// KL(policy ‖ reference) (model/preference_loss.h policy_gradient_token).
//   - LoRA: the base without adapters, as TRL uses a PEFT model with its adapters disabled: the rows of
//     Qwen3Trainable::inference_model() that name no adapter, over the frozen base's own storage (no copy).
//   - every parameter trained: a copy of the forward weights as loaded (deq(Q(W)) under QAT, so the KL of the first
//     step is 0), taken before a resumed run restores its checkpoint: every start of the run has the same reference.
#pragma once

#include <cstdint>
#include <vector>

#include "model/qwen3_model.h"
#include "model/qwen3_trainable.h"
#include "train/grpo.h"

namespace nvfp4lm {

// The reference of `model` as it is now (call it before any step, and before restoring a checkpoint).
Qwen3Model frozen_reference(const Qwen3Trainable& model);

// The reference's log-probability of each completion token, laid out as completion_batch(prompts, completions)'s
// targets ([rows x width], the value at the position that predicts the token; 0 elsewhere). Row by row, the logits
// of the completion's positions only (Qwen3Model::forward_last): at most (completion + 1) x vocab floats at once.
std::vector<float> reference_token_logps(const Qwen3Model& reference,
                                         const std::vector<const std::vector<int32_t>*>& prompts,
                                         const std::vector<const Completion*>& completions, int64_t width);

}  // namespace nvfp4lm
