// Choosing the next token from a row of logits: greedy, or sampling with temperature, top-k, top-p and min-p,
// after optional logit biases and penalties. Works on CPU F32 logits (the model returns F32 logits; a row is tiny
// next to a decode step). Sampling semantics follow Hugging Face transformers' logits processors so that a user
// moving from `model.generate` gets the same distribution; the OpenAI-API options (logit bias, presence and
// frequency penalties) follow OpenAI's definition in vLLM's order, so a client moving from vLLM gets the same too:
//   1. logit bias: bias[t] added to the raw logit of each listed token (OpenAI logit_bias);
//   2. repetition penalty over every token seen so far (prompt + generated), each distinct id once:
//      logit / penalty when logit > 0, logit * penalty otherwise (RepetitionPenaltyLogitsProcessor);
//   3. presence and frequency penalties over the tokens generated so far (not the prompt; vLLM's output tokens):
//      logit[t] -= frequency_penalty * count(t) + presence_penalty * (count(t) > 0);
//   4. temperature: logits / T; T == 0 means greedy (argmax of the modified logits, lowest id on ties);
//   5. top-k: keep logits >= the k-th largest (ties at the boundary are kept, as in TopKLogitsWarper);
//   6. top-p: keep the smallest prefix of the tokens sorted by probability whose mass before the token is
//      < p (the token that crosses p is kept; TopPLogitsWarper);
//   7. min-p: drop tokens whose probability is < min_p * the largest probability (MinPLogitsWarper);
//   8. draw from the renormalized distribution.
// Steps 1-3 apply to greedy too. With all of them off the row is used as given (no copy), so their addition changed
// no output. At least one token always survives. Probabilities are computed in double. A Sampler owns its RNG
// (core/rng.h), so the tokens drawn are a pure function of (seed, logits, history): same seed, same output, on any
// machine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"

namespace nvfp4lm {

struct SamplingOptions {
  // Defaults are Qwen3-Instruct-2507's recommended settings (generation_config.json of the release).
  float temperature = 0.7f;         // 0: greedy
  int64_t top_k = 20;               // 0: off
  float top_p = 0.8f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;    // 0: off; [-2, 2] as OpenAI
  float frequency_penalty = 0.0f;   // 0: off; [-2, 2] as OpenAI
  // (token id, bias) sorted by id, each id once; bias in [-100, 100] (-100 in effect bans the token). Ids are
  // checked against the vocabulary where it is known (the serve request, or the row at sampling time).
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint64_t seed = 0;

  bool greedy() const { return temperature == 0.0f; }
  // Whether steps 1-3 can change a row (with none active the logits are used as they are).
  bool modifies_logits() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f || !logit_bias.empty();
  }
  // Throws Error naming the flag (--temperature, --top-k, ..., logit_bias) for out-of-range values.
  void validate() const;
  // "greedy" or "temperature 0.7, top-k 20, top-p 0.8, seed 0" (what is active only).
  std::string describe() const;
};

struct TokenProbability {
  int32_t id = 0;
  double probability = 0;
};

// Step 1, in place. Error naming logit_bias when an id is outside [0, logits.size()).
void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias);

// Step 2, in place. Ids in `seen` must be in [0, logits.size()); repeated ids are penalized once.
void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> seen, float penalty);

// Step 3, in place: count(t) is how often t occurs in `generated` (ids in [0, logits.size())).
void apply_presence_frequency_penalties(std::span<float> logits, std::span<const int32_t> generated, float presence,
                                        float frequency);

// The largest logit. Throws Error when a logit is NaN or +inf, or all are -inf (the message says the model is broken).
float checked_max_logit(std::span<const float> logits);

// Index of the largest logit (the lowest index on ties). Throws Error when a logit is NaN or all are -inf.
int32_t argmax_logit(std::span<const float> logits);

// Steps 4-7 for a sampling (temperature > 0) configuration: the tokens that may be drawn, most probable first
// (ties by lower id) when top-k or top-p is active and in id order otherwise, with probabilities summing to 1.
// Throws Error for NaN logits or when every logit is -inf.
std::vector<TokenProbability> sampling_distribution(std::span<const float> logits, const SamplingOptions& options);

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);

  // The next token for one row of logits. `seen` is the history the repetition penalty looks at (prompt + generated);
  // `generated` the tokens of this answer so far, which the presence and frequency penalties count (a chat's
  // earlier turns are prompt, as in the OpenAI API).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> seen = {},
                 std::span<const int32_t> generated = {});
  // sample() drawing only ids below `decodable`: a model's embedding table is often padded past its tokenizer
  // (151936 rows for 151669 tokens), and those rows are not tokens.
  int32_t sample_decodable(std::span<const float> logits, size_t decodable, std::span<const int32_t> seen = {},
                           std::span<const int32_t> generated = {});

  // One uniform in [0, 1) from the sampler's stream, for a draw made elsewhere (CachedLm::append_choose).
  float next_uniform() { return rng_.uniform(); }

  const SamplingOptions& options() const { return options_; }
  const Rng& rng() const { return rng_; }

 private:
  SamplingOptions options_;
  Rng rng_;
  std::vector<float> scratch_;        // the row after steps 1-3
  std::vector<float> decodable_row_;  // logits with the ids past `decodable` masked out
};

}  // namespace nvfp4lm
