// The CPU kernels' vectorisable exp against std::exp in double: a dense sweep of the finite range (relative
// error within 3 ulp), and the special values the attention mask and SwiGLU rely on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/cpu/vector_math.h"

namespace nvfp4lm::test_vector_math {
namespace {

TEST(VectorMath, ExpMatchesLibmWithinThreeUlp) {
  double worst = 0;
  float worst_x = 0;
  for (float x = -87.0f; x < 88.7f; x += 0.001953125f * (1.f + std::fabs(x) / 8)) {
    const double expected = std::exp(static_cast<double>(x));
    const double rel = std::fabs(cpu::exp_vectorizable(x) - expected) / expected;
    if (rel > worst) {
      worst = rel;
      worst_x = x;
    }
  }
  EXPECT_LT(worst, 3 * 5.96e-8) << "at x = " << worst_x;
}

TEST(VectorMath, ExpSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(cpu::exp_vectorizable(0.f), 1.f);
  EXPECT_EQ(cpu::exp_vectorizable(-inf), 0.f);    // masked attention scores
  EXPECT_EQ(cpu::exp_vectorizable(-100.f), 0.f);  // below FLT_MIN: flushed
  EXPECT_EQ(cpu::exp_vectorizable(inf), inf);
  EXPECT_EQ(cpu::exp_vectorizable(89.f), inf);
  EXPECT_TRUE(std::isfinite(cpu::exp_vectorizable(88.7f)));
  EXPECT_TRUE(std::isnan(cpu::exp_vectorizable(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace nvfp4lm::test_vector_math
