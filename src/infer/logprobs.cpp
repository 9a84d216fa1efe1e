// See logprobs.h.
#include "infer/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "infer/sampler.h"

namespace nvfp4lm {

NextTokenLogprobs next_token_logprobs(std::span<const float> logits, int64_t candidates, int32_t chosen,
                                      int64_t top_k) {
  NVFP4LM_CHECK(candidates >= 1 && candidates <= static_cast<int64_t>(logits.size()),
                "logprobs: {} candidate tokens for a row of {} logits", candidates, logits.size());
  NVFP4LM_CHECK(chosen >= 0 && chosen < candidates, "logprobs: token {} is not one of the {} candidate tokens", chosen,
                candidates);
  NVFP4LM_CHECK(top_k >= 0, "logprobs: the number of top tokens must be >= 0, got {}", top_k);
  const std::span<const float> row = logits.first(static_cast<size_t>(candidates));
  const double max_logit = checked_max_logit(row);
  double sum = 0;
  for (const float logit : row) sum += std::exp(static_cast<double>(logit) - max_logit);
  const double log_normalizer = max_logit + std::log(sum);
  auto logprob_of = [&](int32_t id) {
    return TokenLogprob{id, static_cast<double>(row[static_cast<size_t>(id)]) - log_normalizer};
  };

  NextTokenLogprobs out;
  out.chosen = logprob_of(chosen);
  const auto k = static_cast<size_t>(std::min<int64_t>(top_k, candidates));
  if (k == 0) return out;
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
    const float la = row[static_cast<size_t>(a)], lb = row[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  for (size_t i = 0; i < k; ++i) out.top.push_back(logprob_of(ids[i]));
  return out;
}

double next_token_entropy(std::span<const float> logits, int64_t candidates, double temperature) {
  NVFP4LM_CHECK(candidates >= 1 && candidates <= static_cast<int64_t>(logits.size()),
                "entropy: {} candidate tokens for a row of {} logits", candidates, logits.size());
  const double scale = temperature > 0 ? 1.0 / temperature : 1.0;
  const std::span<const float> row = logits.first(static_cast<size_t>(candidates));
  const double max_logit = checked_max_logit(row) * scale;
  // H = log Z - sum_i p_i z_i with z the scaled logits shifted by their maximum, Z = sum_i exp(z_i).
  double sum = 0, weighted = 0;
  for (const float logit : row) {
    if (logit == -std::numeric_limits<float>::infinity()) continue;
    const double z = static_cast<double>(logit) * scale - max_logit;
    const double e = std::exp(z);
    sum += e;
    weighted += e * z;
  }
  return std::max(0.0, std::log(sum) - weighted / sum);
}

}  // namespace nvfp4lm
