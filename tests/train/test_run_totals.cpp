// What a run counts across processes (train/run_totals.h): the bests, skipped steps and the metrics tail survive
// the trip through trainer_state.json, and the evaluation's best is marked on its step.
#include <gtest/gtest.h>

#include <cmath>

#include "train/run_totals.h"

namespace nvfp4lm::test_run_totals {
namespace {

StepMetrics step(int64_t n, double loss, std::optional<double> eval_loss = std::nullopt, bool skipped = false) {
  StepMetrics m;
  m.step = n;
  m.loss = loss;
  m.loss_tokens = 10;
  m.skipped = skipped;
  if (eval_loss) {
    m.eval = EvalMetrics{};
    m.eval->loss = *eval_loss;
  }
  return m;
}

TEST(RunTotals, BestsSkipsAndTheEvaluationsBest) {
  RunTotals totals;
  StepMetrics a = step(1, 3.0, 2.5);
  totals.record(a);
  EXPECT_TRUE(a.eval->best);
  StepMetrics b = step(2, NAN, std::nullopt, /*skipped=*/true);
  totals.record(b);
  StepMetrics c = step(3, 2.0, 2.7);
  totals.record(c);
  EXPECT_FALSE(c.eval->best) << "2.7 is not below 2.5";
  StepMetrics d = step(4, 2.5, 2.1);
  totals.record(d);
  EXPECT_TRUE(d.eval->best);
  EXPECT_EQ(totals.loss_tokens, 40);
  EXPECT_EQ(totals.skipped_steps, 1);
  EXPECT_EQ(totals.best_step, 3);
  EXPECT_EQ(totals.best_loss, 2.0);
  EXPECT_EQ(totals.best_eval_step, 4);
  EXPECT_EQ(totals.best_eval_loss, 2.1);
  EXPECT_EQ(totals.last_loss, 2.5);
}

TEST(RunTotals, RoundTripThroughTheTrainerState) {
  RunTotals totals;
  for (int64_t n = 1; n <= static_cast<int64_t>(kMetricsTail) + 5; ++n) {
    StepMetrics m = step(n, 10.0 / static_cast<double>(n), n % 4 == 0 ? std::optional<double>(1.0 / n) : std::nullopt);
    totals.record(m);
  }
  ASSERT_EQ(totals.metrics_tail.size(), kMetricsTail);
  EXPECT_EQ(totals.metrics_tail.front()["step"], 6);
  const nlohmann::json state = {{"totals", totals.totals_json(99)}, {"metrics", totals.metrics_json()}};
  EXPECT_EQ(state["totals"]["total_steps"], 99);
  const RunTotals back = RunTotals::from_state(state, "test state");
  EXPECT_EQ(back.loss_tokens, totals.loss_tokens);
  EXPECT_EQ(back.best_step, totals.best_step);
  EXPECT_EQ(back.best_loss, totals.best_loss);
  EXPECT_EQ(back.best_eval_step, totals.best_eval_step);
  EXPECT_EQ(back.best_eval_loss, totals.best_eval_loss);
  EXPECT_EQ(back.last_loss, totals.last_loss);
  EXPECT_EQ(back.metrics_tail, totals.metrics_tail);
}

TEST(RunTotals, AnOldStateWithoutTotalsReadsAsZero) {
  const RunTotals back = RunTotals::from_state(nlohmann::json::object(), "old state");
  EXPECT_EQ(back.loss_tokens, 0);
  EXPECT_EQ(back.best_step, 0);
  EXPECT_TRUE(back.metrics_tail.empty());
}

}  // namespace
}  // namespace nvfp4lm::test_run_totals
