// The rollouts of `train --objective grpo` (train/grpo.h RolloutFn): each prompt's completion sampled by the batch
// decode engine (infer/batch_engine.h, continuous batching) over Qwen3Trainable::inference_model(), the very tensors
// the training forward reads (deq(Q(W)) under QAT, refreshed after every step): the policy samples from its NVFP4
// forward weights with no copy and no server to re-sync. A completion equals `generate` of its prompt alone with the
// same sampling and seed (the engine's guarantee, batch_engine.h).
#pragma once

#include <cstdint>
#include <vector>

#include "infer/sampler.h"
#include "tokenizer/tokenizer.h"
#include "train/grpo.h"
#include "train/train_options.h"

namespace nvfp4lm {

struct RolloutSettings {
  SamplingOptions sampling;  // the seed is each completion's own
  int64_t max_new_tokens = 512;
  int64_t slots = 16;            // completions decoded at once
  std::vector<int32_t> eos_ids;  // empty: the model's and tokenizer's (infer/stop_conditions.h)
};

RolloutFn batch_engine_rollouts(Tokenizer tokenizer, RolloutSettings settings);

// What `train --objective grpo` samples with, as TRL's GRPOTrainer samples: --temperature, top-k and top-p off, at
// most --max-completion-tokens.
RolloutSettings grpo_rollout_settings(const TrainOptions& options);

}  // namespace nvfp4lm
