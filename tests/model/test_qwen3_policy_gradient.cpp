// GRPO's clipped policy-gradient loss (model/preference_loss.h policy_gradient_token) through Qwen3Trainable, on the
// untied tiny fixture model with QAT off:
//  - the token function against a float64 statement of TRL's formulas, written out here, its derivative against
//    central differences away from the clip's kinks, and which side of the clip each case takes;
//  - the model's loss statistics (loss, k3 KL, clipped tokens) against the same formulas over log-probabilities
//    computed in double from the inference model's logits, with sampling log-probabilities that put some tokens
//    inside the clip range and some outside on either side;
//  - every parameter's gradient against central finite differences of the model's own loss (clipping and KL on);
//  - the on-policy case (no sampling log-probabilities: r = 1): the loss is -Σ A over the scored tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/preference_loss.h"
#include "model_test_util.h"
#include "ops/cross_entropy.h"

namespace nvfp4lm::test::test_qwen3_policy_gradient {
namespace {

// TRL grpo_trainer.py _compute_loss (huggingface/trl f2cd577): coef_1 = exp(logp - old), coef_2 = clamp(coef_1,
// 1 - eps_low, 1 + eps_high), loss = -min(coef_1 A, coef_2 A) + beta (exp(ref - logp) - (ref - logp) - 1).
double trl_token_loss(double eps_low, double eps_high, double beta, double logp, double old, double a, double ref) {
  const double coef_1 = std::exp(logp - old);
  const double coef_2 = std::min(std::max(coef_1, 1 - eps_low), 1 + eps_high);
  const double kl = std::exp(ref - logp) - (ref - logp) - 1;
  return -std::min(coef_1 * a, coef_2 * a) + beta * kl;
}

TEST(PolicyGradientLoss, TokenFunctionIsTrlsAndItsDerivativeFollowsFiniteDifferences) {
  const PolicyGradientSettings settings{0.2, 0.28, 0.04};
  struct Case {
    double log_ratio, advantage;
    bool clipped;
  };
  const Case cases[] = {{0.05, 1.5, false}, {-0.05, -0.8, false}, {0.5, 1.5, true},  {-0.5, -0.8, true},
                        {-0.5, 1.5, false}, {0.5, -0.8, false},   {0.0, 0.0, false}, {0.3, 2.0, true}};
  for (const Case& c : cases) {
    const double logp = -1.7, old = logp - c.log_ratio, ref = -1.2;
    const PolicyGradientToken t = policy_gradient_token(settings, logp, old, c.advantage, ref);
    EXPECT_NEAR(t.loss, trl_token_loss(0.2, 0.28, 0.04, logp, old, c.advantage, ref), 1e-14);
    EXPECT_EQ(t.clipped, c.clipped) << c.log_ratio << " " << c.advantage;
    const double h = 1e-6;
    const double numeric = (trl_token_loss(0.2, 0.28, 0.04, logp + h, old, c.advantage, ref) -
                            trl_token_loss(0.2, 0.28, 0.04, logp - h, old, c.advantage, ref)) /
                           (2 * h);
    EXPECT_NEAR(t.d_logp, numeric, 1e-7) << c.log_ratio << " " << c.advantage;
    EXPECT_NEAR(t.kl, std::exp(ref - logp) - (ref - logp) - 1, 1e-15);
  }
  // No KL term without beta: the reference is not read.
  const PolicyGradientToken plain = policy_gradient_token({}, -1.0, -1.0, 2.0, NAN);
  EXPECT_EQ(plain.loss, -2.0);
  EXPECT_EQ(plain.d_logp, -2.0);
  EXPECT_EQ(plain.kl, 0.0);
}

// Each scored token's log softmax(logits)[target], in double from the inference model's logits (NaN elsewhere).
std::vector<double> float64_token_logps(Qwen3Trainable& model, const TrainBatch& batch) {
  const Tensor logits = model.inference_model().forward(batch.ids, nullptr, nullptr);
  const int64_t vocab = logits.dim(2), n = batch.ids.numel();
  std::vector<double> out(static_cast<size_t>(n), NAN);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t target = batch.targets.data<int32_t>()[i];
    if (target == kIgnoreIndex) continue;
    const float* z = logits.data<float>() + i * vocab;
    const double max = *std::max_element(z, z + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(z[v]) - max);
    out[static_cast<size_t>(i)] = static_cast<double>(z[target]) - max - std::log(sum);
  }
  return out;
}

TrainLoss pg_loss(double beta) {
  TrainLoss loss;
  loss.policy_gradient = PolicyGradientSettings{0.2, 0.28, beta};
  return loss;
}

// The fixture's two rows as two completions with advantages of both signs; sampling log-probabilities that put the
// scored tokens in turn inside the clip range, above it and below it; a reference a little off.
TrainBatch pg_batch(Qwen3Trainable& model) {
  const Reference ref(false);
  TrainBatch batch = ref.batch(false);
  const std::vector<double> logps = float64_token_logps(model, batch);
  batch.advantages = {1.3f, -0.7f};
  const double offsets[] = {0.03, -0.6, 0.6, -0.04};
  for (size_t i = 0; i < logps.size(); ++i) {
    const double lp = std::isnan(logps[i]) ? 0.0 : logps[i];
    batch.old_logps.push_back(static_cast<float>(lp - offsets[i % 4]));
    batch.ref_logps.push_back(static_cast<float>(lp + 0.3 * std::sin(static_cast<double>(i))));
  }
  return batch;
}

TEST(Qwen3PolicyGradient, StatisticsAreTrlsFormulasOverTheModelsLogProbabilities) {
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  const TrainBatch batch = pg_batch(model);
  const std::vector<double> logps = float64_token_logps(model, batch);
  const int64_t t = batch.ids.dim(1);
  double loss = 0, kl = 0;
  int64_t tokens = 0, clipped = 0;
  for (size_t i = 0; i < logps.size(); ++i) {
    if (std::isnan(logps[i])) continue;
    const double a = batch.advantages[i / static_cast<size_t>(t)];
    loss += trl_token_loss(0.2, 0.28, 0.04, logps[i], batch.old_logps[i], a, batch.ref_logps[i]);
    kl += std::exp(batch.ref_logps[i] - logps[i]) - (batch.ref_logps[i] - logps[i]) - 1;
    const double r = std::exp(logps[i] - batch.old_logps[i]);
    clipped += (a > 0 && r > 1.28) || (a < 0 && r < 0.8);
    ++tokens;
  }
  ASSERT_GT(clipped, 0);
  ASSERT_LT(clipped, tokens);
  const LossStats stats = model.evaluate(batch, pg_loss(0.04));
  EXPECT_EQ(stats.tokens, tokens);
  EXPECT_EQ(stats.clipped, clipped);
  EXPECT_NEAR(stats.loss_sum, loss, 1e-4 * std::fabs(loss) + 1e-5);
  EXPECT_NEAR(stats.kl_sum, kl, 1e-4 * kl + 1e-6);
}

TEST(Qwen3PolicyGradient, GradientsFollowFiniteDifferences) {
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  const TrainBatch batch = pg_batch(model);
  const TrainLoss loss = pg_loss(0.04);
  const float grad_scale = 1.0f / static_cast<float>(count_loss_tokens(batch));  // DAPO: over the scored tokens
  const int checked = check_gradients_by_finite_differences(model, batch, loss, grad_scale);
  EXPECT_EQ(checked, 2 + 11 * 2 + 1);
}

TEST(Qwen3PolicyGradient, OnPolicyTheLossIsMinusTheAdvantagesOverTheTokens) {
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  const Reference ref(false);
  TrainBatch batch = ref.batch(false);
  batch.advantages = {0.5f, -2.0f};
  const int64_t t = batch.ids.dim(1);
  double expected = 0;
  for (int64_t i = 0; i < batch.targets.numel(); ++i)
    if (batch.targets.data<int32_t>()[i] != kIgnoreIndex) expected -= batch.advantages[static_cast<size_t>(i / t)];
  const LossStats stats = model.evaluate(batch, pg_loss(0.0));
  EXPECT_DOUBLE_EQ(stats.loss_sum, expected);
  EXPECT_EQ(stats.clipped, 0);
  EXPECT_EQ(stats.kl_sum, 0.0);
  batch.advantages.pop_back();
  EXPECT_THROW(model.evaluate(batch, pg_loss(0.0)), Error);
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_policy_gradient
