// GRPO (`train --objective grpo`, issue 50): what a step does between sampling and the loss, in the order it does it.
//   1. rollouts: G completions of each of the step's prompts, sampled from the policy's current forward weights by
//      a RolloutFn (tools/grpo_rollouts.h: the batch decode engine over Qwen3Trainable::inference_model(), the same
//      storage, no copy); completion c of a step is drawn with seed rollout_seed(seed, step, c), so a resumed run
//      samples exactly what the uninterrupted one did;
//   2. rewards: a built-in verifiable check or a user command (RewardSpec), one number a completion;
//   3. advantages: each group's rewards normalized, TRL's scale_rewards "group": (r - mean) / (std + 1e-4), std with
//      Bessel's correction (trl/trainer/grpo_trainer.py and utils.py nanstd, huggingface/trl f2cd577);
//   4. the training rows: prompt + completion, the completion's tokens (its end-of-sequence token included) scored,
//      each row carrying its advantage, for the policy-gradient loss (model/preference_loss.h), normalized over the
//      step's completion tokens (TRL's default loss_type "dapo").
// train/ does not sample (infer/ is another layer): the trainer is handed a RolloutFn.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/sample.h"
#include "model/qwen3_trainable.h"

namespace nvfp4lm {

struct Completion {
  std::vector<int32_t> tokens;  // every sampled token, the end-of-sequence token included when it ended the text
  std::string text;             // what the model said: decoded, without the end-of-sequence token
  bool ended = false;           // by its end-of-sequence token (not the token budget)
  // The sum over its tokens of the entropy of the distribution each was drawn from (the `entropy` metric), when the
  // RolloutFn measures it.
  std::optional<double> entropy_sum;
};

// Samples one completion a prompt (prompt i with seed seeds[i]) from `model`'s current weights.
using RolloutFn = std::function<std::vector<Completion>(
    Qwen3Trainable& model, const std::vector<std::vector<int32_t>>& prompts, const std::vector<uint64_t>& seeds)>;

uint64_t rollout_seed(uint64_t seed, int64_t step, int64_t completion);

// --reward: exact (the record's "answer" against the completion's final answer: the text after its last "####",
// else its last \boxed{...}, else its last number; numbers compare as numbers, text as trimmed text), regex:PATTERN
// (1 when ECMAScript PATTERN matches somewhere in the completion), json (1 when the completion is one JSON value), or
// command:CMD (run by /bin/sh with one JSON object a completion on its stdin — the prompt's record with "completion"
// added — and one number a line expected on its stdout, within timeout_seconds). Rewards are 0 or 1 but a command's.
enum class RewardKind { Exact, Regex, Json, Command };
struct RewardSpec {
  RewardKind kind = RewardKind::Exact;
  std::string argument;  // the pattern or the command
  double timeout_seconds = 60;
};
RewardSpec parse_reward_spec(std::string_view text);   // Error listing the forms
std::string reward_spec_text(const RewardSpec& spec);  // the flag's spelling

// Before any step: Error naming the file and line of the first prompt record `spec` cannot score (exact: one without
// "answer"), so a run never starts on data its reward cannot read. records[i] is samples[i]'s.
void check_prompts_for_reward(const RewardSpec& spec, const std::vector<nlohmann::json>& records,
                              const std::vector<Sample>& samples, const std::string& file);

// The exact check's final answer of `text` (empty: none).
std::string extract_final_answer(std::string_view text);

// One reward a completion: completion i answers the prompt whose record is records[i]. Errors name the record's
// place for a missing "answer", and the command's line for a bad or missing number.
std::vector<double> score_completions(const RewardSpec& spec, const std::vector<const nlohmann::json*>& records,
                                      const std::vector<const Completion*>& completions);

// Group-normalized advantages of `rewards` (groups of `group` consecutive completions).
std::vector<float> group_advantages(const std::vector<double>& rewards, int64_t group);

// The training rows of completions (row i: prompts[i] then completions[i].tokens, padded with pad_id to the longest),
// targets on the completion's tokens, advantages[i] on row i.
TrainBatch completion_batch(const std::vector<const std::vector<int32_t>*>& prompts,
                            const std::vector<const Completion*>& completions, const std::vector<float>& advantages,
                            int32_t pad_id);

}  // namespace nvfp4lm
