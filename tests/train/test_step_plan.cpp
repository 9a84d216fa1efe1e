// The step planner (train/step_plan.h) on its own: a pure function of the length settings and each epoch's
// micro-batch count, so every rule is checked here without a model or data.
#include <gtest/gtest.h>

#include "train/step_plan.h"

namespace nvfp4lm::test_step_plan {
namespace {

// Epoch e has batches[e] micro-batches.
StepPlan plan(StepPlanSettings settings, std::vector<int64_t> batches) {
  return plan_steps(settings, [batches](int64_t epoch) { return batches.at(static_cast<size_t>(epoch)); });
}

TEST(StepPlan, MaxStepsTakesGradAccumMicroBatchesEveryStep) {
  const StepPlan p = plan({/*max_steps=*/5, /*epochs=*/1, /*steps_per_epoch=*/0, /*grad_accum=*/3}, {2});
  EXPECT_EQ(p.total_steps, 5);
  EXPECT_EQ(p.total_batches, 0);
  for (int64_t step = 0; step < 5; ++step) {
    EXPECT_EQ(p.micro_batches(step), 3);
    EXPECT_FALSE(p.epoch_of(step).has_value());
  }
  EXPECT_EQ(p.describe(), "5 steps (--max-steps)");
}

TEST(StepPlan, EpochsGroupEveryBatchAndTheLastStepIsShort) {
  // 7 + 6 = 13 micro-batches in groups of 4: 4, 4, 4, 1.
  const StepPlan p = plan({0, 2, 0, 4}, {7, 6});
  EXPECT_EQ(p.total_batches, 13);
  EXPECT_EQ(p.total_steps, 4);
  EXPECT_EQ(p.micro_batches(0), 4);
  EXPECT_EQ(p.micro_batches(2), 4);
  EXPECT_EQ(p.micro_batches(3), 1);
  EXPECT_FALSE(p.epoch_of(3).has_value());
  EXPECT_EQ(p.describe(), "4 steps = 2 epochs x 6 batches / grad-accum 4");
}

TEST(StepPlan, StepsPerEpochCapsEachEpochOnItsOwn) {
  // Epoch 0: 5 batches / 2 = 3 steps, capped at 2 (4 batches); epoch 1: 3 batches = 2 steps (2 + 1 batches);
  // epoch 2: 1 batch = 1 step.
  const StepPlan p = plan({0, 3, 2, 2}, {5, 3, 1});
  EXPECT_EQ(p.total_steps, 5);
  EXPECT_EQ(p.total_batches, 4 + 3 + 1);
  EXPECT_EQ(p.epoch_first_steps, (std::vector<int64_t>{0, 2, 4}));
  const std::vector<int64_t> epochs = {0, 0, 1, 1, 2};
  for (int64_t step = 0; step < p.total_steps; ++step) {
    ASSERT_TRUE(p.epoch_of(step).has_value());
    EXPECT_EQ(*p.epoch_of(step), epochs[static_cast<size_t>(step)]) << "step " << step;
    EXPECT_EQ(p.micro_batches(step), 2) << "an upper bound: the step ends with its epoch";
  }
}

TEST(StepPlan, AnEpochWithoutBatchesHasNoSteps) {
  const StepPlan p = plan({0, 2, 4, 1}, {0, 3});
  EXPECT_EQ(p.total_steps, 3);
  EXPECT_EQ(p.epoch_first_steps, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(*p.epoch_of(0), 1);
}

}  // namespace
}  // namespace nvfp4lm::test_step_plan
