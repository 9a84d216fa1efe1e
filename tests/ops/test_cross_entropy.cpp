// Fused lm_head + cross-entropy vs a naive computation with the full logits in double: loss, token and
// correct counts, dhidden (overwritten, 0 on ignored rows) and dweight (+=), across several token chunks;
// gradients also vs finite differences; bad targets are Errors.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/cross_entropy.h"
#include "ops_testing.h"

namespace nvfp4lm::test_cross_entropy {
namespace {

struct CeReference {
  double loss = 0;
  int64_t tokens = 0, correct = 0;
  std::vector<double> dhidden, dweight;
};

CeReference naive_cross_entropy(const std::vector<double>& h, const std::vector<double>& w,
                                const std::vector<int32_t>& targets, int64_t hidden_dim, int64_t vocab,
                                double grad_scale) {
  const int64_t n = static_cast<int64_t>(targets.size());
  CeReference ref;
  ref.dhidden.assign(h.size(), 0.0);
  ref.dweight.assign(w.size(), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t target = targets[static_cast<size_t>(i)];
    if (target == kIgnoreIndex) continue;
    std::vector<double> logits(static_cast<size_t>(vocab));
    for (int64_t v = 0; v < vocab; ++v)
      for (int64_t j = 0; j < hidden_dim; ++j)
        logits[static_cast<size_t>(v)] +=
            h[static_cast<size_t>(i * hidden_dim + j)] * w[static_cast<size_t>(v * hidden_dim + j)];
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    double max_logit = logits[static_cast<size_t>(best)], sum = 0;
    for (double z : logits) sum += std::exp(z - max_logit);
    const double lse = max_logit + std::log(sum);
    ref.loss += lse - logits[static_cast<size_t>(target)];
    ref.tokens += 1;
    ref.correct += best == target;
    for (int64_t v = 0; v < vocab; ++v) {
      const double dz = grad_scale * (std::exp(logits[static_cast<size_t>(v)] - lse) - (v == target ? 1 : 0));
      for (int64_t j = 0; j < hidden_dim; ++j) {
        ref.dhidden[static_cast<size_t>(i * hidden_dim + j)] += dz * w[static_cast<size_t>(v * hidden_dim + j)];
        ref.dweight[static_cast<size_t>(v * hidden_dim + j)] += dz * h[static_cast<size_t>(i * hidden_dim + j)];
      }
    }
  }
  return ref;
}

TEST(CrossEntropy, MatchesFullLogitsAcrossChunksWithIgnoredTokens) {
  Rng rng(70);
  const int64_t tokens = 150, hidden_dim = 16, vocab = 37;  // 150 tokens, ~100 targets: two chunks of 64 + a tail
  Tensor hidden = test::strided_copy(test::random_normal({tokens, hidden_dim}, rng), 3, 1);
  Tensor lm_head = test::random_normal({vocab, hidden_dim}, rng, 0.5f);
  std::vector<int32_t> target(tokens);
  for (auto& t : target) t = rng.uniform() < 0.33f ? kIgnoreIndex : static_cast<int32_t>(rng.below(vocab));
  const float grad_scale = 1.f / 97.f;
  const CeReference ref =
      naive_cross_entropy(test::to_doubles(hidden), test::to_doubles(lm_head), target, hidden_dim, vocab, grad_scale);
  ASSERT_GT(ref.tokens, 64 + 1);

  Tensor dhidden = test::random_normal({tokens, hidden_dim}, rng);  // garbage: overwritten, ignored rows -> 0
  Tensor dweight = test::random_normal({vocab, hidden_dim}, rng);   // accumulated into
  std::vector<double> dweight_total = test::to_doubles(dweight);
  for (size_t i = 0; i < dweight_total.size(); ++i) dweight_total[i] += ref.dweight[i];
  const CrossEntropyResult result =
      lm_head_cross_entropy(hidden, lm_head, Tensor::from_ints(target, {tokens}), grad_scale, &dhidden, &dweight);
  EXPECT_EQ(result.tokens, ref.tokens);
  EXPECT_EQ(result.correct, ref.correct);
  EXPECT_NEAR(result.loss_sum, ref.loss, 1e-5 * ref.loss);
  test::expect_near_doubles(dhidden, ref.dhidden, test::kForwardTol, "dhidden");
  test::expect_near_doubles(dweight, dweight_total, test::kForwardTol, "dweight (+=)");

  // Loss only: the same numbers, no gradients touched.
  const CrossEntropyResult loss_only =
      lm_head_cross_entropy(hidden, lm_head, Tensor::from_ints(target, {tokens}), grad_scale, nullptr, nullptr);
  EXPECT_EQ(loss_only.loss_sum, result.loss_sum);
  EXPECT_EQ(loss_only.correct, result.correct);
}

// Per-token scales (CrossEntropyTokens): the gradient is Σ_i grad_scale · s_i · d loss_i, built here token by token
// from the naive reference (each token alone, with its own scale), and the losses are each token's.
TEST(CrossEntropy, TokenScalesWeighEachTokensGradientAndLossesAreEachTokens) {
  Rng rng(71);
  const int64_t tokens = 150, hidden_dim = 16, vocab = 37;
  Tensor hidden = test::random_normal({tokens, hidden_dim}, rng);
  Tensor lm_head = test::random_normal({vocab, hidden_dim}, rng, 0.5f);
  std::vector<int32_t> target(tokens);
  for (auto& t : target) t = rng.uniform() < 0.33f ? kIgnoreIndex : static_cast<int32_t>(rng.below(vocab));
  const Tensor scales = test::random_normal({tokens}, rng);  // both signs, as advantages are
  const float grad_scale = 1.f / 97.f;
  std::vector<double> dhidden_ref(static_cast<size_t>(tokens * hidden_dim), 0.0);
  std::vector<double> dweight_ref(static_cast<size_t>(vocab * hidden_dim), 0.0);
  std::vector<double> losses_ref(static_cast<size_t>(tokens), 0.0);
  for (int64_t i = 0; i < tokens; ++i) {
    if (target[static_cast<size_t>(i)] == kIgnoreIndex) continue;
    std::vector<int32_t> alone(tokens, kIgnoreIndex);
    alone[static_cast<size_t>(i)] = target[static_cast<size_t>(i)];
    const CeReference one = naive_cross_entropy(test::to_doubles(hidden), test::to_doubles(lm_head), alone, hidden_dim,
                                                vocab, static_cast<double>(grad_scale) * scales.data<float>()[i]);
    losses_ref[static_cast<size_t>(i)] = one.loss;
    for (size_t k = 0; k < dhidden_ref.size(); ++k) dhidden_ref[k] += one.dhidden[k];
    for (size_t k = 0; k < dweight_ref.size(); ++k) dweight_ref[k] += one.dweight[k];
  }
  Tensor dhidden = Tensor::empty({tokens, hidden_dim}, DType::F32);
  Tensor dweight = Tensor::zeros({vocab, hidden_dim}, DType::F32);
  Tensor losses = test::random_normal({tokens}, rng);  // garbage: every entry is written
  lm_head_cross_entropy(hidden, lm_head, Tensor::from_ints(target, {tokens}), grad_scale, &dhidden, &dweight,
                        {&scales, &losses});
  test::expect_near_doubles(losses, losses_ref, test::kForwardTol, "token losses");
  test::expect_near_doubles(dhidden, dhidden_ref, test::kForwardTol, "dhidden");
  test::expect_near_doubles(dweight, dweight_ref, test::kForwardTol, "dweight");
}

TEST(CrossEntropy, CorrectCountsArgmaxHits) {
  // Targets chosen as the argmax for some rows (and not for others) must be counted exactly.
  Rng rng(71);
  const int64_t tokens = 20, hidden_dim = 8, vocab = 11;
  Tensor hidden = test::random_normal({tokens, hidden_dim}, rng),
         lm_head = test::random_normal({vocab, hidden_dim}, rng);
  const std::vector<double> h = test::to_doubles(hidden), w = test::to_doubles(lm_head);
  std::vector<int32_t> target(tokens);
  int64_t expected_correct = 0;
  for (int64_t i = 0; i < tokens; ++i) {
    std::vector<double> logits(vocab, 0.0);
    for (int64_t v = 0; v < vocab; ++v)
      for (int64_t j = 0; j < hidden_dim; ++j)
        logits[static_cast<size_t>(v)] +=
            h[static_cast<size_t>(i * hidden_dim + j)] * w[static_cast<size_t>(v * hidden_dim + j)];
    const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const bool hit = i % 3 != 0;
    target[static_cast<size_t>(i)] = hit ? best : (best + 1) % static_cast<int32_t>(vocab);
    expected_correct += hit;
  }
  const CrossEntropyResult result =
      lm_head_cross_entropy(hidden, lm_head, Tensor::from_ints(target, {tokens}), 1.f, nullptr, nullptr);
  EXPECT_EQ(result.correct, expected_correct);
  EXPECT_EQ(result.tokens, tokens);
}

TEST(CrossEntropy, GradientsMatchFiniteDifferences) {
  Rng rng(72);
  const int64_t tokens = 5, hidden_dim = 4, vocab = 7;
  Tensor hidden = test::random_normal({tokens, hidden_dim}, rng),
         lm_head = test::random_normal({vocab, hidden_dim}, rng);
  const std::vector<int32_t> target{3, kIgnoreIndex, 0, 6, 2};
  const double grad_scale = 0.25;
  std::vector<double> hd = test::to_doubles(hidden), wd = test::to_doubles(lm_head);
  auto loss = [&] { return grad_scale * naive_cross_entropy(hd, wd, target, hidden_dim, vocab, 0).loss; };
  const std::vector<double> dh_expected = test::finite_difference(hd, loss);
  const std::vector<double> dw_expected = test::finite_difference(wd, loss);
  Tensor dhidden = Tensor::empty({tokens, hidden_dim}, DType::F32),
         dweight = Tensor::zeros({vocab, hidden_dim}, DType::F32);
  lm_head_cross_entropy(hidden, lm_head, Tensor::from_ints(target, {tokens}), static_cast<float>(grad_scale), &dhidden,
                        &dweight);
  test::expect_near_doubles(dhidden, dh_expected, test::kGradTol, "dhidden");
  test::expect_near_doubles(dweight, dw_expected, test::kGradTol, "dweight");
}

TEST(CrossEntropy, AllIgnoredDoesNothingButZeroDhidden) {
  Rng rng(73);
  Tensor hidden = test::random_normal({3, 4}, rng), lm_head = test::random_normal({5, 4}, rng);
  Tensor dhidden = test::random_normal({3, 4}, rng), dweight = test::random_normal({5, 4}, rng);
  const std::vector<float> dweight_before = to_float_vector(dweight);
  const CrossEntropyResult result = lm_head_cross_entropy(
      hidden, lm_head, Tensor::from_ints({kIgnoreIndex, kIgnoreIndex, kIgnoreIndex}, {3}), 1.f, &dhidden, &dweight);
  EXPECT_EQ(result.tokens, 0);
  EXPECT_EQ(result.loss_sum, 0.0);
  for (float value : to_float_vector(dhidden)) EXPECT_EQ(value, 0.f);
  EXPECT_EQ(to_float_vector(dweight), dweight_before);
}

TEST(CrossEntropy, OutOfRangeTargetIsAnError) {
  Tensor hidden = Tensor::zeros({2, 4}, DType::F32), lm_head = Tensor::zeros({5, 4}, DType::F32);
  for (int32_t bad : {5, -1, -101}) {
    EXPECT_THROW(lm_head_cross_entropy(hidden, lm_head, Tensor::from_ints({0, bad}, {2}), 1.f, nullptr, nullptr), Error)
        << bad;
  }
}

TEST(CrossEntropy, LogitsAreTheLinearHead) {
  Rng rng(74);
  Tensor hidden = test::random_normal({3, 6}, rng), lm_head = test::random_normal({9, 6}, rng);
  Tensor logits = Tensor::empty({3, 9}, DType::F32);
  lm_head_logits(hidden, lm_head, logits);
  const std::vector<double> h = test::to_doubles(hidden), w = test::to_doubles(lm_head);
  std::vector<double> expected(27, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int v = 0; v < 9; ++v)
      for (int j = 0; j < 6; ++j)
        expected[static_cast<size_t>(i * 9 + v)] +=
            h[static_cast<size_t>(i * 6 + j)] * w[static_cast<size_t>(v * 6 + j)];
  test::expect_near_doubles(logits, expected, test::kForwardTol, "logits");
}

}  // namespace
}  // namespace nvfp4lm::test_cross_entropy
