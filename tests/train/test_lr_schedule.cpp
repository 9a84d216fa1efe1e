// Learning-rate schedules: exact values at the key points of warmup and decay.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "train/optim/lr_schedule.h"

namespace nvfp4lm::test_lr_schedule {
namespace {

LrSchedule schedule(LrDecay decay, int64_t warmup, int64_t total, double min_ratio) {
  LrSchedule s;
  s.decay = decay;
  s.peak_lr = 2e-4;
  s.warmup_steps = warmup;
  s.total_steps = total;
  s.min_lr_ratio = min_ratio;
  check_lr_schedule(s);
  return s;
}

TEST(LrSchedule, WarmupIsLinearFromTheFirstStep) {
  for (LrDecay decay : {LrDecay::Constant, LrDecay::Linear, LrDecay::Cosine}) {
    const LrSchedule s = schedule(decay, 10, 110, 0.1);
    EXPECT_DOUBLE_EQ(lr_at(s, 0), 2e-4 * 1 / 10) << lr_decay_name(decay);
    EXPECT_DOUBLE_EQ(lr_at(s, 4), 2e-4 * 5 / 10) << lr_decay_name(decay);
    EXPECT_DOUBLE_EQ(lr_at(s, 9), 2e-4) << lr_decay_name(decay);   // last warmup step at peak
    EXPECT_DOUBLE_EQ(lr_at(s, 10), 2e-4) << lr_decay_name(decay);  // decay starts at peak
  }
}

TEST(LrSchedule, ConstantStaysAtPeak) {
  const LrSchedule s = schedule(LrDecay::Constant, 0, 0, 0.5);
  for (int64_t step : {0, 1, 1000, 1000000}) EXPECT_EQ(lr_at(s, step), 2e-4);
}

TEST(LrSchedule, LinearDecay) {
  const LrSchedule s = schedule(LrDecay::Linear, 10, 110, 0.1);
  // progress = (step - 10) / 100; lr = peak * (0.1 + 0.9 * (1 - progress))
  EXPECT_DOUBLE_EQ(lr_at(s, 35), 2e-4 * (0.1 + 0.9 * 0.75));
  EXPECT_DOUBLE_EQ(lr_at(s, 60), 2e-4 * (0.1 + 0.9 * 0.5));
  EXPECT_DOUBLE_EQ(lr_at(s, 109), 2e-4 * (0.1 + 0.9 * 0.01));
  EXPECT_DOUBLE_EQ(lr_at(s, 110), 2e-4 * 0.1);
  EXPECT_DOUBLE_EQ(lr_at(s, 5000), 2e-4 * 0.1);  // past the end: the floor
  const LrSchedule to_zero = schedule(LrDecay::Linear, 0, 4, 0.0);
  EXPECT_DOUBLE_EQ(lr_at(to_zero, 0), 2e-4);
  EXPECT_DOUBLE_EQ(lr_at(to_zero, 1), 1.5e-4);
  EXPECT_DOUBLE_EQ(lr_at(to_zero, 3), 0.5e-4);
  EXPECT_EQ(lr_at(to_zero, 4), 0.0);
}

TEST(LrSchedule, CosineDecay) {
  const LrSchedule s = schedule(LrDecay::Cosine, 10, 110, 0.1);
  EXPECT_DOUBLE_EQ(lr_at(s, 60), 2e-4 * (0.1 + 0.9 * 0.5));  // half way: cos(pi/2) = 0
  EXPECT_DOUBLE_EQ(lr_at(s, 35), 2e-4 * (0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi / 4))));
  EXPECT_NEAR(lr_at(s, 110), 2e-4 * 0.1, 1e-20);
  EXPECT_NEAR(lr_at(s, 1000), 2e-4 * 0.1, 1e-20);
  // Monotone non-increasing after warmup.
  for (int64_t step = 10; step < 120; ++step) EXPECT_LE(lr_at(s, step + 1), lr_at(s, step)) << step;
}

TEST(LrSchedule, RejectsBadSettings) {
  LrSchedule s;
  s.decay = LrDecay::Cosine;
  s.total_steps = 0;  // decay needs a length
  EXPECT_THROW(check_lr_schedule(s), Error);
  s.total_steps = 10;
  s.warmup_steps = 11;
  EXPECT_THROW(check_lr_schedule(s), Error);
  s.warmup_steps = 0;
  s.min_lr_ratio = 1.5;
  EXPECT_THROW(check_lr_schedule(s), Error);
  s.min_lr_ratio = 0;
  s.peak_lr = -1;
  EXPECT_THROW(check_lr_schedule(s), Error);
  EXPECT_EQ(parse_lr_decay("cosine"), LrDecay::Cosine);
  EXPECT_EQ(parse_lr_decay("linear"), LrDecay::Linear);
  EXPECT_EQ(parse_lr_decay("constant"), LrDecay::Constant);
  EXPECT_THROW(parse_lr_decay("step"), Error);
}

}  // namespace
}  // namespace nvfp4lm::test_lr_schedule
