// See sampler.h. Candidates are token ids ordered by (logit desc, id asc), which is the order of probability
// for any temperature, so top-k and top-p never need the probabilities sorted separately. Without top-k, top-p
// sorts only a growing prefix (256, 1024, ...) until that prefix holds the requested mass: a 150k vocabulary is
// then a partial sort of a few hundred ids per step, not a full sort.
#include "infer/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace nvfp4lm {

float checked_max_logit(std::span<const float> logits) {
  NVFP4LM_CHECK(!logits.empty(), "sampling: empty logits row");
  float best = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    NVFP4LM_CHECK(!std::isnan(logits[i]),
                  "sampling: the model produced a NaN logit (token {}); the weights or the "
                  "computation are broken (try --device cpu, or check the model with `nvfp4lm info`)",
                  i);
    best = std::max(best, logits[i]);
  }
  NVFP4LM_CHECK(best > -std::numeric_limits<float>::infinity(), "sampling: every logit is -inf");
  NVFP4LM_CHECK(best < std::numeric_limits<float>::infinity(), "sampling: the model produced a +inf logit");
  return best;
}

void SamplingOptions::validate() const {
  NVFP4LM_CHECK(std::isfinite(temperature) && temperature >= 0.0f, "--temperature must be >= 0 (0 = greedy), got {}",
                temperature);
  NVFP4LM_CHECK(top_k >= 0, "--top-k must be >= 0 (0 = off), got {}", top_k);
  NVFP4LM_CHECK(top_p > 0.0f && top_p <= 1.0f, "--top-p must be in (0, 1] (1 = off), got {}", top_p);
  NVFP4LM_CHECK(min_p >= 0.0f && min_p < 1.0f, "--min-p must be in [0, 1) (0 = off), got {}", min_p);
  NVFP4LM_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f,
                "--repetition-penalty must be > 0 (1 = off), got {}", repetition_penalty);
  // The OpenAI API's ranges: a larger penalty or bias only hides a mistake.
  NVFP4LM_CHECK(presence_penalty >= -2.0f && presence_penalty <= 2.0f,
                "--presence-penalty must be in [-2, 2] (0 = off), got {}", presence_penalty);
  NVFP4LM_CHECK(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f,
                "--frequency-penalty must be in [-2, 2] (0 = off), got {}", frequency_penalty);
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto [id, bias] = logit_bias[i];
    NVFP4LM_CHECK(id >= 0, "logit_bias: token id {} is negative", id);
    NVFP4LM_CHECK(bias >= -100.0f && bias <= 100.0f, "logit_bias: the bias of token {} must be in [-100, 100], got {}",
                  id, bias);
    NVFP4LM_CHECK(i == 0 || logit_bias[i - 1].first < id,
                  "logit_bias: token ids must be sorted and distinct, got {} after {}", id, logit_bias[i - 1].first);
  }
}

std::string SamplingOptions::describe() const {
  std::string text = greedy() ? std::string("greedy") : fmt::format("temperature {:g}", temperature);
  if (!greedy()) {
    if (top_k > 0) text += fmt::format(", top-k {}", top_k);
    if (top_p < 1.0f) text += fmt::format(", top-p {:g}", top_p);
    if (min_p > 0.0f) text += fmt::format(", min-p {:g}", min_p);
  }
  if (repetition_penalty != 1.0f) text += fmt::format(", repetition penalty {:g}", repetition_penalty);
  if (presence_penalty != 0.0f) text += fmt::format(", presence penalty {:g}", presence_penalty);
  if (frequency_penalty != 0.0f) text += fmt::format(", frequency penalty {:g}", frequency_penalty);
  if (!logit_bias.empty())
    text += fmt::format(", logit bias on {} token{}", logit_bias.size(), logit_bias.size() == 1 ? "" : "s");
  if (!greedy()) text += fmt::format(", seed {}", seed);
  return text;
}

void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias) {
  for (const auto& [id, value] : bias) {
    NVFP4LM_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size(),
                  "logit_bias: token id {} is outside the vocabulary [0, {})", id, logits.size());
    logits[static_cast<size_t>(id)] += value;
  }
}

void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> seen, float penalty) {
  if (penalty == 1.0f || seen.empty()) return;
  std::vector<bool> done(logits.size(), false);
  for (int32_t id : seen) {
    NVFP4LM_ASSERT(id >= 0 && static_cast<size_t>(id) < logits.size(), "token id {} outside the vocabulary", id);
    if (done[static_cast<size_t>(id)]) continue;
    done[static_cast<size_t>(id)] = true;
    float& logit = logits[static_cast<size_t>(id)];
    logit = logit > 0.0f ? logit / penalty : logit * penalty;
  }
}

void apply_presence_frequency_penalties(std::span<float> logits, std::span<const int32_t> generated, float presence,
                                        float frequency) {
  if ((presence == 0.0f && frequency == 0.0f) || generated.empty()) return;
  // Sorted, equal ids are adjacent: each run is one token and its count. An answer is at most a context long, so
  // sorting it per step is cheaper than clearing a count per vocabulary entry.
  std::vector<int32_t> ids(generated.begin(), generated.end());
  std::sort(ids.begin(), ids.end());
  for (size_t run = 0; run < ids.size();) {
    size_t end = run + 1;
    while (end < ids.size() && ids[end] == ids[run]) ++end;
    const int32_t id = ids[run];
    NVFP4LM_ASSERT(id >= 0 && static_cast<size_t>(id) < logits.size(), "token id {} outside the vocabulary", id);
    logits[static_cast<size_t>(id)] -= frequency * static_cast<float>(end - run) + presence;
    run = end;
  }
}

int32_t argmax_logit(std::span<const float> logits) {
  const float best = checked_max_logit(logits);
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] == best) return static_cast<int32_t>(i);
  return 0;  // unreachable: best is one of the logits
}

std::vector<TokenProbability> sampling_distribution(std::span<const float> logits, const SamplingOptions& options) {
  NVFP4LM_ASSERT(options.temperature > 0.0f, "sampling_distribution needs a temperature > 0");
  const float max_logit = checked_max_logit(logits);
  const double inv_temperature = 1.0 / static_cast<double>(options.temperature);
  // Unnormalized probability; 1 for the most likely token.
  auto weight = [&](int32_t id) {
    return std::exp((static_cast<double>(logits[static_cast<size_t>(id)]) - max_logit) * inv_temperature);
  };
  auto more_likely = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };

  const int64_t vocab = static_cast<int64_t>(logits.size());
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  double norm = 0;  // the mass top-p and min-p are relative to: of the top-k set, or of the whole vocabulary
  if (options.top_k > 0 && options.top_k < vocab) {
    const auto kth = ids.begin() + (options.top_k - 1);
    std::nth_element(ids.begin(), kth, ids.end(), more_likely);
    const float boundary = logits[static_cast<size_t>(*kth)];
    // Everything after kth has a logit <= boundary; those equal to it are kept, as HF keeps ties.
    auto tail_end =
        std::partition(kth + 1, ids.end(), [&](int32_t id) { return logits[static_cast<size_t>(id)] == boundary; });
    ids.erase(tail_end, ids.end());
    std::sort(ids.begin(), ids.end(), more_likely);
    for (int32_t id : ids) norm += weight(id);
  } else {
    for (int32_t id : ids) norm += weight(id);
    if (options.top_p < 1.0f) {
      // Sort a prefix large enough to hold the top-p mass.
      size_t prefix = std::min<size_t>(ids.size(), 256);
      for (;;) {
        std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(prefix), ids.end(), more_likely);
        double mass = 0;
        for (size_t i = 0; i < prefix; ++i) mass += weight(ids[i]);
        if (mass >= options.top_p * norm || prefix == ids.size()) break;
        prefix = std::min(ids.size(), prefix * 4);
      }
      ids.resize(prefix);
    }
  }

  std::vector<TokenProbability> kept;
  kept.reserve(ids.size());
  double before = 0;  // mass of the tokens already kept (top-p looks at the mass before a token)
  for (int32_t id : ids) {
    if (options.top_p < 1.0f && !kept.empty() && before >= options.top_p * norm) break;
    const double w = weight(id);
    before += w;
    // min-p: the most likely token has weight 1, so the threshold min_p * p_max is simply min_p (and it is kept).
    if (w < options.min_p) continue;
    kept.push_back({id, w});
  }
  double total = 0;
  for (const auto& token : kept) total += token.probability;
  for (auto& token : kept) token.probability /= total;
  return kept;
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) { options_.validate(); }

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> seen,
                        std::span<const int32_t> generated) {
  std::span<const float> row = logits;
  if (options_.modifies_logits()) {
    scratch_.assign(logits.begin(), logits.end());
    apply_logit_bias(scratch_, options_.logit_bias);
    apply_repetition_penalty(scratch_, seen, options_.repetition_penalty);
    apply_presence_frequency_penalties(scratch_, generated, options_.presence_penalty, options_.frequency_penalty);
    row = scratch_;
  }
  if (options_.greedy()) return argmax_logit(row);
  const std::vector<TokenProbability> candidates = sampling_distribution(row, options_);
  // 53 random bits: a uniform double in [0, 1).
  const double u = static_cast<double>(rng_.next_u64() >> 11) * 0x1p-53;
  double cumulative = 0;
  for (const auto& token : candidates) {
    cumulative += token.probability;
    if (u < cumulative) return token.id;
  }
  return candidates.back().id;  // u within rounding of 1
}

int32_t Sampler::sample_decodable(std::span<const float> logits, size_t decodable, std::span<const int32_t> seen,
                                  std::span<const int32_t> generated) {
  if (decodable >= logits.size()) return sample(logits, seen, generated);
  decodable_row_.assign(logits.begin(), logits.end());
  std::fill(decodable_row_.begin() + static_cast<std::ptrdiff_t>(decodable), decodable_row_.end(),
            -std::numeric_limits<float>::infinity());
  return sample(decodable_row_, seen, generated);
}

}  // namespace nvfp4lm
