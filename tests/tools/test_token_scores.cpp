// Token scores (tools/token_scores.h) against the formulas written out here in long double: cross-entropy of the
// target, argmax (first on ties, NaN never wins), KL(P_ref || P_model) as sum p_ref (log p_ref - log p_model), which
// is exactly 0 for identical rows and positive otherwise; ignored targets are skipped; totals do not depend on the
// thread count; quantiles by nearest rank.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "common/test_util.h"
#include "ops/cross_entropy.h"
#include "tools/token_scores.h"

namespace nvfp4lm::test_token_scores {
namespace {

long double log_softmax(const std::vector<float>& z, size_t v) {
  long double m = z[0];
  for (float x : z) m = std::max<long double>(m, x);
  long double sum = 0;
  for (float x : z) sum += std::exp(static_cast<long double>(x) - m);
  return static_cast<long double>(z[v]) - m - std::log(sum);
}

std::vector<float> random_row(Rng& rng, int64_t vocab, float scale) {
  const Tensor t = test::random_normal({vocab}, rng, scale);
  return std::vector<float>(t.data<float>(), t.data<float>() + vocab);
}

TEST(TokenScores, LossArgmaxAndKlFollowTheirFormulas) {
  Rng rng(11);
  const int64_t vocab = 97;
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<float> model = random_row(rng, vocab, 3.0f), reference = random_row(rng, vocab, 3.0f);
    const auto target = static_cast<int32_t>(trial * 7 % vocab);
    const RowScore score = score_row(model.data(), reference.data(), vocab, target);
    EXPECT_NEAR(score.loss, -static_cast<double>(log_softmax(model, target)), 1e-9);
    EXPECT_NEAR(score.reference_loss, -static_cast<double>(log_softmax(reference, target)), 1e-9);
    long double kl = 0;
    for (size_t v = 0; v < static_cast<size_t>(vocab); ++v) {
      const long double log_ref = log_softmax(reference, v);
      kl += std::exp(log_ref) * (log_ref - log_softmax(model, v));
    }
    EXPECT_NEAR(score.kl, static_cast<double>(kl), 1e-9);
    EXPECT_GT(score.kl, 0.0);
    EXPECT_EQ(score.argmax, std::max_element(model.begin(), model.end()) - model.begin());
    EXPECT_EQ(score.reference_argmax, std::max_element(reference.begin(), reference.end()) - reference.begin());
  }
}

TEST(TokenScores, IdenticalRowsHaveKlExactlyZero) {
  Rng rng(3);
  for (int64_t vocab : {2, 511, 151936}) {
    const std::vector<float> row = random_row(rng, vocab, 5.0f);
    const std::vector<float> copy = row;
    EXPECT_EQ(score_row(row.data(), copy.data(), vocab, 1).kl, 0.0) << vocab;
  }
}

TEST(TokenScores, ArgmaxTakesTheFirstMaximumAndIgnoresNan) {
  const std::vector<float> row = {1.f, NAN, 3.f, 3.f, -1.f};
  EXPECT_EQ(score_row(row.data(), nullptr, 5, 0).argmax, 2);
}

TEST(TokenScores, TotalsSkipIgnoredTargetsAndDoNotDependOnThreads) {
  Rng rng(5);
  const int64_t rows = 33, vocab = 301;
  const Tensor logits = test::random_normal({rows, vocab}, rng, 2.0f);
  const Tensor reference = test::random_normal({rows, vocab}, rng, 2.0f);
  std::vector<int32_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r)
    targets[static_cast<size_t>(r)] = r % 3 == 0 ? kIgnoreIndex : static_cast<int32_t>(r * 5);
  ScoreTotals one, many;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  add_row_scores(logits.data<float>(), reference.data<float>(), rows, vocab, targets.data(), one);
  omp_set_num_threads(std::max(threads, 3));
  add_row_scores(logits.data<float>(), reference.data<float>(), rows, vocab, targets.data(), many);
  omp_set_num_threads(threads);
  EXPECT_EQ(one.tokens, 22);
  EXPECT_EQ(one.loss_sum, many.loss_sum);
  EXPECT_EQ(one.kl_sum, many.kl_sum);
  EXPECT_EQ(one.kl_values, many.kl_values);
  double expected = 0;
  for (int64_t r = 0; r < rows; ++r)
    if (targets[static_cast<size_t>(r)] != kIgnoreIndex)
      expected += score_row(logits.data<float>() + r * vocab, nullptr, vocab, targets[static_cast<size_t>(r)]).loss;
  EXPECT_EQ(one.loss_sum, expected);

  std::vector<int32_t> bad = targets;
  bad[1] = static_cast<int32_t>(vocab);
  ScoreTotals ignored;
  test::expect_error([&] { add_row_scores(logits.data<float>(), nullptr, rows, vocab, bad.data(), ignored); },
                     {"target token 301", "row 1"});
}

TEST(TokenScores, QuantileByNearestRank) {
  EXPECT_EQ(quantile({}, 0.5), 0.0);
  EXPECT_EQ(quantile({5.f, 1.f, 3.f, 2.f, 4.f}, 0.5), 3.0);
  EXPECT_EQ(quantile({5.f, 1.f, 3.f, 2.f, 4.f}, 1.0), 5.0);
  EXPECT_EQ(quantile({5.f, 1.f, 3.f, 2.f, 4.f}, 0.0), 1.0);
}

}  // namespace
}  // namespace nvfp4lm::test_token_scores
