// SwiGLU: forward vs the formula in double on the two halves of a fused [N, gate|up] buffer; backward vs
// finite differences into a fused gradient buffer; in place.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/swiglu.h"
#include "ops_testing.h"

namespace nvfp4lm::test_swiglu {
namespace {

std::vector<double> swiglu_reference(const std::vector<double>& gate, const std::vector<double>& up) {
  std::vector<double> out(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) out[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
  return out;
}

TEST(SwiGlu, ForwardOnFusedHalves) {
  Rng rng(50);
  for (auto [rows, width] : {std::pair<int64_t, int64_t>{3, 5}, {70, 301}}) {
    Tensor fused = test::random_normal({rows, 2 * width}, rng, 3.f);
    Tensor gate = fused.narrow(1, 0, width), up = fused.narrow(1, width, width);
    Tensor out = Tensor::empty({rows, width}, DType::F32);
    swiglu_forward(gate, up, out);
    test::expect_near_doubles(out, swiglu_reference(test::to_doubles(gate), test::to_doubles(up)), test::kForwardTol,
                              fmt::format("out [{}, {}]", rows, width));
  }
}

TEST(SwiGlu, ExtremeGatesStayFinite) {
  Tensor gate = Tensor::from_floats({-200.f, -88.f, 0.f, 88.f, 200.f}, {1, 5});
  Tensor up = Tensor::from_floats({1, 1, 1, 1, 1}, {1, 5});
  Tensor out = Tensor::empty({1, 5}, DType::F32), dgate = Tensor::empty({1, 5}, DType::F32);
  Tensor dup = Tensor::empty({1, 5}, DType::F32);
  swiglu_forward(gate, up, out);
  swiglu_backward(up, gate, up, dgate, dup);
  const std::vector<float> o = to_float_vector(out), dg = to_float_vector(dgate);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(std::isfinite(o[static_cast<size_t>(i)]) && std::isfinite(dg[static_cast<size_t>(i)])) << i;
  }
  EXPECT_EQ(o[4], 200.f);
  EXPECT_NEAR(dg[4], 1.f, 1e-6f);
  EXPECT_NEAR(dg[0], 0.f, 1e-6f);
}

TEST(SwiGlu, BackwardMatchesFiniteDifferences) {
  Rng rng(51);
  const int64_t rows = 4, width = 7;
  Tensor fused = test::random_normal({rows, 2 * width}, rng, 2.f);
  Tensor gate = fused.narrow(1, 0, width), up = fused.narrow(1, width, width);
  Tensor dout = test::random_normal({rows, width}, rng);
  std::vector<double> gd = test::to_doubles(gate), ud = test::to_doubles(up);
  const std::vector<double> rd = test::to_doubles(dout);
  auto loss = [&] { return test::dot(swiglu_reference(gd, ud), rd); };
  const std::vector<double> dgate_expected = test::finite_difference(gd, loss);
  const std::vector<double> dup_expected = test::finite_difference(ud, loss);

  Tensor dfused = test::random_normal({rows, 2 * width}, rng);  // garbage, overwritten
  Tensor dgate = dfused.narrow(1, 0, width), dup = dfused.narrow(1, width, width);
  swiglu_backward(dout, gate, up, dgate, dup);
  test::expect_near_doubles(dgate, dgate_expected, test::kGradTol, "dgate");
  test::expect_near_doubles(dup, dup_expected, test::kGradTol, "dup");

  // In place: gradients written over gate / up themselves.
  swiglu_backward(dout, gate, up, gate, up);
  test::expect_near_doubles(gate, dgate_expected, test::kGradTol, "dgate in place");
  test::expect_near_doubles(up, dup_expected, test::kGradTol, "dup in place");
}

}  // namespace
}  // namespace nvfp4lm::test_swiglu
