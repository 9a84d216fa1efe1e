// Global gradient norm and clipping (torch.nn.utils.clip_grad_norm_ semantics).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "common/test_util.h"
#include "train/optim/grad_clip.h"

namespace nvfp4lm::test_grad_clip {
namespace {

std::vector<Parameter> random_grads(Rng& rng, float scale) {
  std::vector<Parameter> params;
  for (auto shape : {Shape{300, 257}, Shape{5}, Shape{70000}}) {
    params.push_back({fmt::format("p{}", params.size()), Tensor::zeros(shape, DType::F32),
                      test::random_normal(shape, rng, scale), true});
  }
  return params;
}

double direct_norm(const std::vector<Parameter>& params) {
  long double sum = 0;
  for (const Parameter& p : params)
    for (float g : to_float_vector(p.grad)) sum += static_cast<long double>(g) * g;
  return static_cast<double>(std::sqrt(sum));
}

TEST(GradClip, NormMatchesDirectSumAndIgnoresThreadCount) {
  Rng rng(1);
  std::vector<Parameter> params = random_grads(rng, 0.01f);
  const double expected = direct_norm(params);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = grad_norm(params);
  omp_set_num_threads(2);
  const double two = grad_norm(params);
  omp_set_num_threads(saved);
  EXPECT_NEAR(one, expected, 1e-12 * expected);
  EXPECT_EQ(one, two);  // fixed chunking and summation order: same bits
}

TEST(GradClip, ClipsAboveMaxNormOnly) {
  Rng rng(2);
  std::vector<Parameter> params = random_grads(rng, 0.1f);
  const double norm = direct_norm(params);
  const std::vector<float> before = to_float_vector(params[0].grad);

  // Below the threshold: coefficient 1 (clamped), gradients untouched, norm still reported.
  ClipResult loose = clip_grad_norm(params, 2 * norm);
  EXPECT_NEAR(loose.norm, norm, 1e-9 * norm);
  EXPECT_EQ(loose.coefficient, 1.0f);
  EXPECT_TRUE(loose.finite);
  EXPECT_EQ(to_float_vector(params[0].grad), before);

  // Above: coefficient max_norm / (norm + 1e-6); the returned norm is the one before clipping.
  const double max_norm = norm / 4;
  ClipResult tight = clip_grad_norm(params, max_norm);
  EXPECT_NEAR(tight.norm, norm, 1e-9 * norm);
  EXPECT_FLOAT_EQ(tight.coefficient, static_cast<float>(max_norm / (norm + 1e-6)));
  const std::vector<float> after = to_float_vector(params[0].grad);
  for (size_t i = 0; i < after.size(); i += 101) EXPECT_EQ(after[i], before[i] * tight.coefficient);
  EXPECT_NEAR(grad_norm(params), max_norm, 1e-5 * max_norm);

  EXPECT_EQ(clip_coefficient(10.0, 0.0), 1.0f);  // max_norm <= 0: clipping off
  EXPECT_FLOAT_EQ(clip_coefficient(10.0, 1.0), static_cast<float>(1.0 / (10.0 + 1e-6)));
}

TEST(GradClip, NonFiniteNormIsReportedAndGradientsLeftAlone) {
  Rng rng(3);
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    std::vector<Parameter> params = random_grads(rng, 1.0f);
    params[2].grad.data<float>()[12345] = bad;
    const std::vector<float> before = to_float_vector(params[0].grad);
    ClipResult result = clip_grad_norm(params, 1.0);
    EXPECT_FALSE(result.finite) << bad;
    EXPECT_FALSE(std::isfinite(result.norm)) << bad;
    EXPECT_EQ(result.coefficient, 1.0f);
    EXPECT_EQ(to_float_vector(params[0].grad), before);
  }
}

}  // namespace
}  // namespace nvfp4lm::test_grad_clip
