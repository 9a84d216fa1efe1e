// Log-probabilities of next tokens, for `generate --json --logprobs K` (and any caller that reports them, e.g. a
// server's "logprobs" field). They describe the model's own distribution, before sampling modifiers, as OpenAI's
// API reports them: log_softmax of the raw logits (temperature 1; no logit bias, penalties, top-k, top-p or min-p),
// so a greedy and a sampled run report the same numbers for the same context.
//
// Only ids [0, candidates) count: the tokens the tokenizer can decode. A model's embedding table is often padded
// past its tokenizer (151936 rows for Qwen3's 151669 tokens); those rows are not tokens and generation never draws
// them, so they are left out of the normalisation too. Computed in double (log-sum-exp with the largest logit
// subtracted).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nvfp4lm {

struct TokenLogprob {
  int32_t id = 0;
  double logprob = 0;  // <= 0; -inf for a token of logit -inf
};

struct NextTokenLogprobs {
  TokenLogprob chosen;
  // The top_k most likely tokens, most likely first (the lower id first on equal logits, so top.front() is the
  // greedy choice, argmax_logit's pick).
  std::vector<TokenLogprob> top;
};

// Logprobs of `chosen` and of the top_k most likely ids in logits[0, candidates). Errors: candidates outside
// [1, logits.size()], chosen outside [0, candidates), top_k < 0, and the broken-model cases of checked_max_logit
// (NaN, +inf, every logit -inf).
NextTokenLogprobs next_token_logprobs(std::span<const float> logits, int64_t candidates, int32_t chosen, int64_t top_k);

// The entropy (nats) of softmax(logits[0, candidates) / temperature): -sum p log p, in double, tokens of logit -inf
// contributing 0. temperature 0 (greedy) counts as 1, the model's own distribution. Errors as next_token_logprobs.
double next_token_entropy(std::span<const float> logits, int64_t candidates, double temperature);

}  // namespace nvfp4lm
