// See grpo_rollouts.h.
#include "tools/grpo_rollouts.h"

#include <algorithm>

#include "infer/batch_engine.h"
#include "infer/prompt_batch.h"
#include "infer/stop_conditions.h"

namespace nvfp4lm {

RolloutSettings grpo_rollout_settings(const TrainOptions& options) {
  RolloutSettings settings;
  settings.sampling.temperature = static_cast<float>(options.temperature);
  settings.sampling.top_k = 0;
  settings.sampling.top_p = 1.0f;
  settings.max_new_tokens = options.max_completion_tokens;
  settings.slots = 32;
  return settings;
}

RolloutFn batch_engine_rollouts(Tokenizer tokenizer, RolloutSettings settings) {
  return
      [tokenizer = std::move(tokenizer), settings](
          Qwen3Trainable& model, const std::vector<std::vector<int32_t>>& prompts, const std::vector<uint64_t>& seeds) {
        NVFP4LM_ASSERT(prompts.size() == seeds.size() && !prompts.empty(), "{} prompts, {} seeds", prompts.size(),
                       seeds.size());
        const Qwen3Model policy = model.inference_model();
        size_t longest = 0;
        for (const auto& prompt : prompts) longest = std::max(longest, prompt.size());
        BatchEngineOptions options;
        options.slots = std::min<int64_t>(settings.slots, static_cast<int64_t>(prompts.size()));
        options.context = static_cast<int64_t>(longest) + settings.max_new_tokens;
        options.prefix_cache = true;  // a prompt's G completions prefill it once (batch_engine.h), the same bits
        BatchEngine engine(policy, tokenizer, options);
        const std::vector<int32_t> eos =
            settings.eos_ids.empty()
                ? end_of_sequence_ids(model.config(), std::nullopt, tokenizer, model.config().vocab_size)
                : settings.eos_ids;
        std::vector<SequenceSpec> specs(prompts.size());
        for (size_t i = 0; i < prompts.size(); ++i) {
          specs[i].prompt = prompts[i];
          specs[i].options.max_new_tokens = settings.max_new_tokens;
          specs[i].options.sampling = settings.sampling;
          specs[i].options.sampling.seed = seeds[i];
          specs[i].options.eos_ids = eos;
          specs[i].entropy = true;
          // LoRA: the policy is the base with the trained adapters (inference_model's adapter 0).
          if (policy.lora_adapters() != nullptr) specs[i].adapter = 0;
        }
        std::vector<Completion> completions;
        // Every free slot filled between steps: nothing here waits on a running answer's pace.
        for (BatchAnswer& answer : run_batch(engine, std::move(specs), {}, engine.slots())) {
          Completion& c = completions.emplace_back();
          c.tokens = std::move(answer.tokens);
          c.text = std::move(answer.text);
          c.ended = answer.stop_reason == StopReason::EndOfSequence;
          c.entropy_sum = 0.0;
          for (float entropy : answer.entropies) *c.entropy_sum += entropy;
        }
        return completions;
      };
}

}  // namespace nvfp4lm
