// Choosing the next token from a row of logits: greedy, or sampling with temperature, top-k, top-p and min-p,
// after an optional repetition penalty. Works on CPU F32 logits (the model returns F32 logits; a row is tiny
// next to a decode step). Semantics follow Hugging Face transformers' logits processors so that a user moving
// from `model.generate` gets the same distribution:
//   1. repetition penalty over every token seen so far (prompt + generated), each distinct id once:
//      logit / penalty when logit > 0, logit * penalty otherwise (RepetitionPenaltyLogitsProcessor);
//   2. temperature: logits / T; T == 0 means greedy (argmax of the penalized logits, lowest id on ties);
//   3. top-k: keep logits >= the k-th largest (ties at the boundary are kept, as in TopKLogitsWarper);
//   4. top-p: keep the smallest prefix of the tokens sorted by probability whose mass before the token is
//      < p (the token that crosses p is kept; TopPLogitsWarper);
//   5. min-p: drop tokens whose probability is < min_p * the largest probability (MinPLogitsWarper);
//   6. draw from the renormalized distribution.
// At least one token always survives. Probabilities are computed in double. A Sampler owns its RNG (core/rng.h),
// so the tokens drawn are a pure function of (seed, logits, history): same seed, same output, on any machine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
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
  uint64_t seed = 0;

  bool greedy() const { return temperature == 0.0f; }
  // Throws Error naming the flag (--temperature, --top-k, ...) for out-of-range values.
  void validate() const;
  // "greedy" or "temperature 0.7, top-k 20, top-p 0.8, seed 0" (what is active only).
  std::string describe() const;
};

struct TokenProbability {
  int32_t id = 0;
  double probability = 0;
};

// Step 1, in place. Ids in `seen` must be in [0, logits.size()); repeated ids are penalized once.
void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> seen, float penalty);

// The largest logit. Throws Error when a logit is NaN or +inf, or all are -inf (the message says the model is broken).
float checked_max_logit(std::span<const float> logits);

// Index of the largest logit (the lowest index on ties). Throws Error when a logit is NaN or all are -inf.
int32_t argmax_logit(std::span<const float> logits);

// Steps 2-5 for a sampling (temperature > 0) configuration: the tokens that may be drawn, most probable first
// (ties by lower id) when top-k or top-p is active and in id order otherwise, with probabilities summing to 1.
// Throws Error for NaN logits or when every logit is -inf.
std::vector<TokenProbability> sampling_distribution(std::span<const float> logits, const SamplingOptions& options);

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);

  // The next token for one row of logits; `seen` is the history the repetition penalty looks at.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> seen = {});
  // sample() drawing only ids below `decodable`: a model's embedding table is often padded past its tokenizer
  // (151936 rows for 151669 tokens), and those rows are not tokens.
  int32_t sample_decodable(std::span<const float> logits, size_t decodable, std::span<const int32_t> seen = {});

  // One uniform in [0, 1) from the sampler's stream, for a draw made elsewhere (CachedLm::append_choose).
  float next_uniform() { return rng_.uniform(); }

  const SamplingOptions& options() const { return options_; }
  const Rng& rng() const { return rng_; }

 private:
  SamplingOptions options_;
  Rng rng_;
  std::vector<float> scratch_;
  std::vector<float> decodable_row_;  // logits with the ids past `decodable` masked out
};

}  // namespace nvfp4lm
