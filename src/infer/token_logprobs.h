// Log-probabilities of generated tokens for the OpenAI API's `logprobs` / `top_logprobs`: the log-softmax of the
// model's raw logits (before temperature, top-k or top-p, as vLLM reports them by default), over the ids a
// tokenizer can decode. Computed in double from the F32 logits row.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nvfp4lm {

struct TokenLogprob {
  int32_t id = 0;
  double logprob = 0;
};

struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // the `top` most likely ids, most likely first (ties: lower id first)
};

// Over logits[0, decodable): the log-probability of `chosen` and of the `top` most likely ids (top <= decodable).
// Error for a NaN logit or when every logit is -inf.
TokenLogprobs token_logprobs(std::span<const float> logits, size_t decodable, int32_t chosen, int top);

}  // namespace nvfp4lm
