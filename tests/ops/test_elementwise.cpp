// Elementwise ops: add / add_inplace / scale / fill on strided views (untouched neighbours), casts against
// core's scalar conversions, sum_squares vs a double sum (single- and multi-chunk, strided).
#include <gtest/gtest.h>

#include "core/numeric.h"
#include "ops/elementwise.h"
#include "ops_testing.h"

namespace nvfp4lm {
namespace {

TEST(Elementwise, AddScaleFillOnViews) {
  Rng rng(60);
  const int64_t rows = 5, width = 9;
  Tensor a = test::strided_copy(test::random_normal({rows, width}, rng), 3, 1, 42.f);
  Tensor b = test::random_normal({rows, width}, rng);
  std::vector<double> expected = test::to_doubles(a);
  const std::vector<double> bd = test::to_doubles(b);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += bd[i];
  add_inplace(a, b);
  test::expect_near_doubles(a, expected, test::kForwardTol, "add_inplace");

  Tensor out = Tensor::empty({rows, width}, DType::F32);
  add(a, b, out);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += bd[i];
  test::expect_near_doubles(out, expected, test::kForwardTol, "add");

  scale_inplace(a, -0.5f);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = (expected[i] - bd[i]) * -0.5;
  test::expect_near_doubles(a, expected, test::kForwardTol, "scale_inplace");

  fill(a, 3.25f);
  for (float value : to_float_vector(a)) EXPECT_EQ(value, 3.25f);

  // A big contiguous tensor (parallel path).
  Tensor big = Tensor::empty({300, 301}, DType::F32);
  fill(big, -1.f);
  for (float value : to_float_vector(big)) ASSERT_EQ(value, -1.f);
}

TEST(Elementwise, ViewsLeaveNeighboursAlone) {
  Tensor wide = Tensor::from_floats(std::vector<float>(12, 7.f), {3, 4});
  Tensor middle = wide.narrow(1, 1, 2);
  fill(middle, 0.f);
  scale_inplace(middle, 2.f);
  EXPECT_EQ(to_float_vector(wide), (std::vector<float>{7, 0, 0, 7, 7, 0, 0, 7, 7, 0, 0, 7}));
}

TEST(Elementwise, CastMatchesScalarConversions) {
  Rng rng(61);
  Tensor x = test::random_normal({4, 33}, rng, 100.f);
  const std::vector<float> values = to_float_vector(x);
  Tensor bf = Tensor::empty({4, 33}, DType::BF16), half = Tensor::empty({4, 33}, DType::F16);
  cast(x, bf);
  cast(x, half);
  const uint16_t* bp = bf.data<uint16_t>();
  const uint16_t* hp = half.data<uint16_t>();
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(bp[i], float_to_bf16(values[i])) << i;
    ASSERT_EQ(hp[i], float_to_f16(values[i])) << i;
  }
  // Back to F32 into a strided destination.
  Tensor back = test::strided_copy(Tensor::zeros({4, 33}, DType::F32), 2, 1);
  cast(bf, back);
  const std::vector<float> b = to_float_vector(back);
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(b[i], bf16_to_float(bp[i])) << i;
}

TEST(Elementwise, SumSquaresMatchesDoubleSum) {
  Rng rng(62);
  for (auto [rows, width] : {std::pair<int64_t, int64_t>{3, 7}, {513, 1031}, {1, 300000}}) {
    Tensor x = test::random_normal({rows, width}, rng);
    double expected = 0;
    for (double v : test::to_doubles(x)) expected += v * v;
    EXPECT_NEAR(sum_squares(x), expected, 1e-6 * expected) << rows << "x" << width;
  }
  Tensor view = test::strided_copy(test::random_normal({50, 20}, rng), 4, 2, 1e6f);  // sentinel would dominate
  double expected = 0;
  for (double v : test::to_doubles(view)) expected += v * v;
  EXPECT_NEAR(sum_squares(view), expected, 1e-6 * expected);
}

}  // namespace
}  // namespace nvfp4lm
