// See token_logprobs.h.
#include "infer/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace nvfp4lm {

TokenLogprobs token_logprobs(std::span<const float> logits, size_t decodable, int32_t chosen, int top) {
  const size_t count = std::min(decodable, logits.size());
  NVFP4LM_ASSERT(chosen >= 0 && static_cast<size_t>(chosen) < count && top >= 0 && static_cast<size_t>(top) <= count,
                 "token_logprobs: token {} and top {} of {} ids", chosen, top, count);
  float best = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < count; ++i) {
    NVFP4LM_CHECK(!std::isnan(logits[i]), "logprobs: the model produced a NaN logit (token {})", i);
    best = std::max(best, logits[i]);
  }
  NVFP4LM_CHECK(best > -std::numeric_limits<float>::infinity(), "logprobs: every logit is -inf");
  double sum = 0;
  for (size_t i = 0; i < count; ++i) sum += std::exp(static_cast<double>(logits[i]) - best);
  const double log_norm = static_cast<double>(best) + std::log(sum);
  auto logprob = [&](int32_t id) { return static_cast<double>(logits[static_cast<size_t>(id)]) - log_norm; };

  TokenLogprobs result;
  result.chosen = {chosen, logprob(chosen)};
  if (top > 0) {
    std::vector<int32_t> ids(count);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + top, ids.end(), [&](int32_t a, int32_t b) {
      const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
      return la > lb || (la == lb && a < b);
    });
    for (int i = 0; i < top; ++i)
      result.top.push_back({ids[static_cast<size_t>(i)], logprob(ids[static_cast<size_t>(i)])});
  }
  return result;
}

}  // namespace nvfp4lm
