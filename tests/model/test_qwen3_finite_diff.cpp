// The hand-written backward against central finite differences of the loss, for the CE and L1 losses, on the
// fixture models (untied and tied: the tied embedding's gradient sums its lookup and lm_head uses), QAT off.
// For every parameter tensor a few entries are perturbed: the two with the largest analytic gradient and one
// more picked by a seeded RNG. The loss is the double sum over tokens (grad_scale 1) and the difference quotient
// is taken in double; the forward is fp32, so h is large enough (1e-2 of the entry's scale) for its rounding
// noise (~1e-6 of the loss) to stay well under the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "model_test_util.h"

namespace nvfp4lm::test::test_qwen3_finite_diff {
namespace {

struct Probe {
  std::string name;
  int64_t index;
  double analytic;
  double numeric;
};

std::vector<Probe> probe(bool tied, LossKind loss) {
  const Reference ref(tied);
  TrainModelOptions options;
  options.qat = QatMode::Off;
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(tied), options);
  const TrainBatch batch = ref.batch(false);
  model.forward_backward(batch, 1.0f, loss);
  Rng rng(tied ? 7 : 11);
  std::vector<Probe> probes;
  for (Parameter& p : model.parameters()) {
    const float* grad = p.grad.data<float>();
    std::vector<int64_t> order(static_cast<size_t>(p.grad.numel()));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 2, order.end(),
                      [&](int64_t a, int64_t b) { return std::fabs(grad[a]) > std::fabs(grad[b]); });
    const std::vector<int64_t> picks{order[0], order[1],
                                     static_cast<int64_t>(rng.uniform() * static_cast<float>(order.size()))};
    float* value = p.value.data<float>();
    const bool norm = p.value.rank() == 1;
    for (int64_t index : picks) {
      const float saved = value[index];
      const double h = (norm ? 1e-2 : 2e-3) * (loss == LossKind::L1 ? 0.1 : 1.0);
      value[index] = saved + static_cast<float>(h);
      model.refresh_quantized();
      const double up = model.evaluate(batch, loss).loss_sum;
      value[index] = saved - static_cast<float>(h);
      model.refresh_quantized();
      const double down = model.evaluate(batch, loss).loss_sum;
      value[index] = saved;
      model.refresh_quantized();
      probes.push_back({p.name, index, grad[index], (up - down) / (2 * h)});
    }
  }
  return probes;
}

void check(bool tied, LossKind loss) {
  const std::vector<Probe> probes = probe(tied, loss);
  EXPECT_GE(probes.size(), (tied ? 24u : 25u) * 3);
  // L1 is piecewise linear in the hidden state: a difference quotient that crosses a kink (some element of the
  // final hidden state changing sign) measures an average slope, so its per-entry tolerance is looser.
  const bool l1 = loss == LossKind::L1;
  const double atol = l1 ? 5e-3 : 2e-3, rtol = l1 ? 6e-2 : 2e-2;
  double diff_sq = 0, ref_sq = 0;
  for (const Probe& p : probes) {
    if (std::getenv("NVFP4LM_TEST_VERBOSE") != nullptr)
      std::fprintf(stderr, "%s[%ld]: analytic %.6g numeric %.6g\n", p.name.c_str(), static_cast<long>(p.index),
                   p.analytic, p.numeric);
    EXPECT_NEAR(p.numeric, p.analytic, atol + rtol * std::fabs(p.analytic))
        << (tied ? "tied " : "") << loss_kind_name(loss) << ": " << p.name << "[" << p.index << "]";
    diff_sq += (p.numeric - p.analytic) * (p.numeric - p.analytic);
    ref_sq += p.analytic * p.analytic;
  }
  // Over all probes together the agreement is much closer than per entry.
  EXPECT_LT(std::sqrt(diff_sq / ref_sq), l1 ? 2e-2 : 5e-3) << (tied ? "tied " : "") << loss_kind_name(loss);
}

TEST(Qwen3FiniteDifferences, CrossEntropy) { check(false, LossKind::CrossEntropy); }
TEST(Qwen3FiniteDifferences, CrossEntropyTied) { check(true, LossKind::CrossEntropy); }
TEST(Qwen3FiniteDifferences, L1) { check(false, LossKind::L1); }
TEST(Qwen3FiniteDifferences, L1Tied) { check(true, LossKind::L1); }

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_finite_diff
