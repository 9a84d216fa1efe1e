// Preference losses (DPO's sigmoid, IPO; model/preference_loss.h) through Qwen3Trainable, on the untied tiny fixture
// model with QAT off, over a batch of two pairs made from the fixture's rows (the same prompt tokens, different
// scored targets):
//  - the pair function against a float64 statement of TRL's formulas, written out here (loss, rewards, accuracy),
//    its derivatives against central differences, and its stability far out (|β · Δ| in the hundreds);
//  - the model's loss statistics against the same formulas over log-probabilities computed in double from the
//    inference model's logits;
//  - every parameter's gradient against central finite differences of the model's own loss, for both losses;
//  - the policy as its own reference: loss log 2 a pair (sigmoid), no pair counted as right (TRL counts chosen >
//    rejected), and completion_logps equal to minus each row's cross-entropy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/preference_loss.h"
#include "model_test_util.h"
#include "ops/cross_entropy.h"

namespace nvfp4lm::test::test_qwen3_dpo {
namespace {

// TRL dpo_trainer.py _compute_loss (huggingface/trl f2cd577): sigmoid -logsigmoid(β Δ); ipo (Δ_avg - 1 / (2β))²
// with each log-ratio divided by its completion's length; rewards β · log-ratio. Written as plainly as possible.
struct Float64Pair {
  double loss, chosen_reward, rejected_reward;
};
Float64Pair trl_pair(PreferenceLossType type, double beta, double lc, double lr, double rc, double rr, double nc,
                     double nr) {
  const double chosen_logratio = lc - rc, rejected_logratio = lr - rr;
  double loss;
  if (type == PreferenceLossType::Sigmoid) {
    loss = -std::log(1.0 / (1.0 + std::exp(-beta * (chosen_logratio - rejected_logratio))));
  } else {
    const double delta = chosen_logratio / nc - rejected_logratio / nr;
    loss = (delta - 1.0 / (2.0 * beta)) * (delta - 1.0 / (2.0 * beta));
  }
  return {loss, beta * chosen_logratio, beta * rejected_logratio};
}

TEST(PreferenceLoss, PairFunctionIsTrlsAndItsDerivativesFollowFiniteDifferences) {
  const PreferencePair pairs[] = {
      {-12.5, -14.0, -13.0, -13.5, 5, 7}, {-3.0, -2.0, -3.5, -1.0, 2, 9}, {-40.0, -41.0, -40.0, -41.0, 11, 3}};
  for (const PreferenceLossType type : {PreferenceLossType::Sigmoid, PreferenceLossType::Ipo}) {
    for (const double beta : {0.1, 0.5, 2.0}) {
      const PreferenceSettings settings{type, beta};
      for (const PreferencePair& p : pairs) {
        const PreferencePairLoss got = preference_pair_loss(settings, p);
        const Float64Pair want =
            trl_pair(type, beta, p.chosen_logp, p.rejected_logp, p.ref_chosen_logp, p.ref_rejected_logp,
                     static_cast<double>(p.chosen_tokens), static_cast<double>(p.rejected_tokens));
        EXPECT_NEAR(got.loss, want.loss, 1e-12 * std::max(1.0, want.loss)) << preference_loss_name(type);
        EXPECT_DOUBLE_EQ(got.chosen_reward, want.chosen_reward);
        EXPECT_DOUBLE_EQ(got.rejected_reward, want.rejected_reward);
        const double h = 1e-5;
        auto loss_at = [&](double dc, double dr) {
          PreferencePair q = p;
          q.chosen_logp += dc;
          q.rejected_logp += dr;
          return preference_pair_loss(settings, q).loss;
        };
        EXPECT_NEAR(got.d_chosen, (loss_at(h, 0) - loss_at(-h, 0)) / (2 * h), 1e-7) << preference_loss_name(type);
        EXPECT_NEAR(got.d_rejected, (loss_at(0, h) - loss_at(0, -h)) / (2 * h), 1e-7) << preference_loss_name(type);
      }
    }
  }
}

TEST(PreferenceLoss, SigmoidStaysFiniteFarOut) {
  const PreferenceSettings settings{PreferenceLossType::Sigmoid, 1.0};
  // β Δ = +900: loss e^-900 (0 in double), no gradient; -900: loss 900, gradient ±β.
  const PreferencePairLoss right = preference_pair_loss(settings, {0, -900, 0, 0, 3, 3});
  EXPECT_EQ(right.loss, 0.0);
  EXPECT_EQ(right.d_chosen, -0.0);
  const PreferencePairLoss wrong = preference_pair_loss(settings, {-900, 0, 0, 0, 3, 3});
  EXPECT_DOUBLE_EQ(wrong.loss, 900.0);
  EXPECT_DOUBLE_EQ(wrong.d_chosen, -1.0);
  EXPECT_DOUBLE_EQ(wrong.d_rejected, 1.0);
  EXPECT_THROW(parse_preference_loss("hinge"), Error);
  EXPECT_EQ(parse_preference_loss("ipo"), PreferenceLossType::Ipo);
}

// Two pairs from the fixture's two rows: pair 0 = (row 0, row 1), pair 1 = (row 1 with its first scored targets
// ignored, row 0 with its last ones ignored). Scored targets only where the fixture has them.
TrainBatch pair_batch(const Reference& ref) {
  const TrainBatch plain = ref.batch(false);
  const int64_t t = plain.ids.dim(1);
  TrainBatch b;
  b.ids = Tensor::empty({4, t}, DType::I32);
  b.targets = Tensor::empty({4, t}, DType::I32);
  const int32_t* ids = plain.ids.data<int32_t>();
  const int32_t* targets = plain.targets.data<int32_t>();
  const int source[4] = {0, 1, 1, 0};
  for (int r = 0; r < 4; ++r) {
    for (int64_t i = 0; i < t; ++i) {
      b.ids.data<int32_t>()[r * t + i] = ids[source[r] * t + i];
      int32_t target = targets[source[r] * t + i];
      if ((r == 2 && i < t / 3) || (r == 3 && i > 2 * t / 3)) target = kIgnoreIndex;
      b.targets.data<int32_t>()[r * t + i] = target;
    }
  }
  return b;
}

// Each row's Σ log softmax(logits)[target] over its scored targets, in double from the inference model's logits,
// and the scored count.
std::vector<std::pair<double, int64_t>> float64_row_logps(Qwen3Trainable& model, const TrainBatch& batch) {
  const Tensor logits = model.inference_model().forward(batch.ids, nullptr, nullptr);
  const int64_t vocab = logits.dim(2), rows = batch.ids.dim(0), t = batch.ids.dim(1);
  std::vector<std::pair<double, int64_t>> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < t; ++i) {
      const int32_t target = batch.targets.data<int32_t>()[r * t + i];
      if (target == kIgnoreIndex) continue;
      const float* z = logits.data<float>() + (r * t + i) * vocab;
      const double max = *std::max_element(z, z + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(z[v]) - max);
      out[static_cast<size_t>(r)].first += static_cast<double>(z[target]) - max - std::log(sum);
      out[static_cast<size_t>(r)].second += 1;
    }
  }
  return out;
}

TrainLoss preference_loss(PreferenceLossType type, double beta) {
  TrainLoss loss;
  loss.preference = PreferenceSettings{type, beta};
  return loss;
}

TEST(Qwen3Dpo, StatisticsAreTrlsFormulasOverTheModelsLogProbabilities) {
  const Reference ref(false);
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  TrainBatch batch = pair_batch(ref);
  batch.reference_logps = {-20.0, -18.5, -21.0, -19.0};
  const auto rows = float64_row_logps(model, batch);
  for (const PreferenceLossType type : {PreferenceLossType::Sigmoid, PreferenceLossType::Ipo}) {
    const double beta = type == PreferenceLossType::Ipo ? 0.5 : 0.1;
    const LossStats stats = model.evaluate(batch, preference_loss(type, beta));
    double loss = 0, chosen_reward = 0, rejected_reward = 0, chosen_logp = 0, rejected_logp = 0;
    int64_t preferred = 0, tokens = 0;
    for (size_t p = 0; p < 2; ++p) {
      const auto& [lc, nc] = rows[2 * p];
      const auto& [lr, nr] = rows[2 * p + 1];
      const Float64Pair want =
          trl_pair(type, beta, lc, lr, batch.reference_logps[2 * p], batch.reference_logps[2 * p + 1],
                   static_cast<double>(nc), static_cast<double>(nr));
      loss += want.loss;
      chosen_reward += want.chosen_reward;
      rejected_reward += want.rejected_reward;
      chosen_logp += lc;
      rejected_logp += lr;
      preferred += want.chosen_reward > want.rejected_reward;
      tokens += nc + nr;
    }
    EXPECT_EQ(stats.pairs, 2);
    EXPECT_EQ(stats.tokens, tokens);
    EXPECT_EQ(stats.tokens, count_loss_tokens(batch));
    EXPECT_NEAR(stats.loss_sum, loss, 1e-5 * loss) << preference_loss_name(type);
    EXPECT_NEAR(stats.chosen_reward_sum, chosen_reward, 1e-5 * std::fabs(chosen_reward));
    EXPECT_NEAR(stats.rejected_reward_sum, rejected_reward, 1e-5 * std::fabs(rejected_reward));
    EXPECT_NEAR(stats.chosen_logp_sum, chosen_logp, 1e-5 * std::fabs(chosen_logp));
    EXPECT_NEAR(stats.rejected_logp_sum, rejected_logp, 1e-5 * std::fabs(rejected_logp));
    EXPECT_EQ(stats.preferred, preferred);
  }
}

void check_finite_differences(PreferenceLossType type, double beta) {
  const Reference ref(false);
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  TrainBatch batch = pair_batch(ref);
  // References near the policy's, so the sigmoid is in its sensitive range.
  batch.reference_logps = model.completion_logps(batch);
  batch.reference_logps[0] += 1.0;
  batch.reference_logps[3] -= 0.5;
  const TrainLoss loss = preference_loss(type, beta);
  const float grad_scale = 0.5f;  // 1 / pairs
  const int checked =
      check_gradients_by_finite_differences(model, batch, loss, grad_scale, std::string(preference_loss_name(type)));
  EXPECT_EQ(checked, 2 + 11 * 2 + 1);  // embedding, final norm, 11 per layer, lm_head
}

TEST(Qwen3Dpo, SigmoidGradientsFollowFiniteDifferences) { check_finite_differences(PreferenceLossType::Sigmoid, 0.5); }
TEST(Qwen3Dpo, IpoGradientsFollowFiniteDifferences) { check_finite_differences(PreferenceLossType::Ipo, 0.1); }

TEST(Qwen3Dpo, ThePolicyAsItsOwnReferenceLosesLogTwoAPair) {
  const Reference ref(false);
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  TrainBatch batch = pair_batch(ref);
  batch.reference_logps = model.completion_logps(batch);
  // completion_logps is minus each row's cross-entropy sum.
  for (int64_t r = 0; r < 4; ++r) {
    TrainBatch row{batch.ids.narrow(0, r, 1).contiguous(), batch.targets.narrow(0, r, 1).contiguous(), {}, {}, {}};
    const double ce = model.evaluate(row).loss_sum;
    EXPECT_NEAR(batch.reference_logps[static_cast<size_t>(r)], -ce, 1e-5 * ce) << "row " << r;
  }
  const LossStats stats = model.evaluate(batch, preference_loss(PreferenceLossType::Sigmoid, 0.1));
  EXPECT_NEAR(stats.loss_sum, 2 * std::log(2.0), 1e-6);
  EXPECT_EQ(stats.preferred, 0);
  EXPECT_NEAR(stats.chosen_reward_sum, 0.0, 1e-6);
  const LossStats ipo = model.evaluate(batch, preference_loss(PreferenceLossType::Ipo, 0.25));
  EXPECT_NEAR(ipo.loss_sum, 2 * 2.0 * 2.0, 1e-5);  // (0 - 1 / (2 · 0.25))² a pair

  TrainBatch odd = batch;
  odd.reference_logps.pop_back();
  EXPECT_THROW(model.evaluate(odd, preference_loss(PreferenceLossType::Sigmoid, 0.1)), Error);
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_dpo
