// See token_scores.h for the definitions.
#include "tools/token_scores.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/cross_entropy.h"

namespace nvfp4lm {
namespace {

struct Softmax {
  double lse = 0;  // log sum exp
  int32_t argmax = 0;
};

Softmax softmax_of(const float* z, int64_t vocab) {
  Softmax s;
  float best = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v) {
    if (z[v] > best) {  // NaN compares false: it never wins
      best = z[v];
      s.argmax = static_cast<int32_t>(v);
    }
  }
  const double m = best;
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(z[v]) - m);
  s.lse = m + std::log(sum);
  return s;
}

}  // namespace

RowScore score_row(const float* logits, const float* reference, int64_t vocab, int32_t target) {
  RowScore score;
  const Softmax model = softmax_of(logits, vocab);
  score.loss = model.lse - static_cast<double>(logits[target]);
  score.argmax = model.argmax;
  if (reference != nullptr) {
    const Softmax ref = softmax_of(reference, vocab);
    score.reference_loss = ref.lse - static_cast<double>(reference[target]);
    score.reference_argmax = ref.argmax;
    double kl = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double log_ref = static_cast<double>(reference[v]) - ref.lse;
      const double log_model = static_cast<double>(logits[v]) - model.lse;
      kl += std::exp(log_ref) * (log_ref - log_model);
    }
    score.kl = kl;
  }
  return score;
}

void add_row_scores(const float* logits, const float* reference, int64_t rows, int64_t vocab, const int32_t* targets,
                    ScoreTotals& totals) {
  std::vector<int64_t> scored;
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == kIgnoreIndex) continue;
    NVFP4LM_CHECK(targets[r] >= 0 && targets[r] < vocab,
                  "evaluation: target token {} at row {} is outside the vocabulary [0, {})", targets[r], r, vocab);
    scored.push_back(r);
  }
  std::vector<RowScore> scores(scored.size());
  const auto count = static_cast<int64_t>(scored.size());
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < count; ++i) {
    const int64_t r = scored[static_cast<size_t>(i)];
    scores[static_cast<size_t>(i)] =
        score_row(logits + r * vocab, reference ? reference + r * vocab : nullptr, vocab, targets[r]);
  }
  for (size_t i = 0; i < scored.size(); ++i) {
    const RowScore& s = scores[i];
    const int32_t target = targets[scored[i]];
    ++totals.tokens;
    totals.loss_sum += s.loss;
    totals.correct += s.argmax == target ? 1 : 0;
    if (reference == nullptr) continue;
    totals.reference_loss_sum += s.reference_loss;
    totals.reference_correct += s.reference_argmax == target ? 1 : 0;
    totals.kl_sum += s.kl;
    totals.top1_agreement += s.argmax == s.reference_argmax ? 1 : 0;
    totals.kl_values.push_back(static_cast<float>(s.kl));
  }
}

double quantile(std::vector<float> values, double fraction) {
  if (values.empty()) return 0;
  const double clamped = std::clamp(fraction, 0.0, 1.0);
  const auto rank = static_cast<size_t>(std::ceil(clamped * static_cast<double>(values.size())));
  const size_t index = rank == 0 ? 0 : rank - 1;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index), values.end());
  return values[index];
}

}  // namespace nvfp4lm
