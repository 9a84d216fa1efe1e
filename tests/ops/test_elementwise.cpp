// Elementwise ops: add / add_inplace / mul_inplace / scale / fill on strided views (untouched neighbours), casts
// against core's scalar conversions, sum_squares vs a double sum (single- and multi-chunk, strided).
#include <gtest/gtest.h>

#include "core/numeric.h"
#include "ops/elementwise.h"
#include "ops_testing.h"

namespace nvfp4lm::test_elementwise {
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

  mul_inplace(a, b);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] *= bd[i];
  test::expect_near_doubles(a, expected, test::kForwardTol, "mul_inplace");

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

// Inverted dropout: the share of zeros is p, the kept values are x / (1 - p) exactly, the mask depends on (seed, index)
// alone (a row-strided view gives the mask of its contiguous copy), accumulate adds, and p = 0 copies.
TEST(Elementwise, DropoutKeepsOneMinusPScaledByItsInverse) {
  const int64_t rows = 64, width = 100;
  std::vector<float> values(static_cast<size_t>(rows * width));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + static_cast<float>(i % 97) / 8.0f;
  const Tensor x = Tensor::from_floats(values, Shape{rows, width});
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  dropout(x, y, 0.25f, 42);
  int64_t zeros = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float got = y.data<float>()[i];
    if (got == 0) {
      ++zeros;
    } else {
      EXPECT_EQ(got, values[static_cast<size_t>(i)] * (1.0f / 0.75f)) << i;
    }
  }
  EXPECT_NEAR(static_cast<double>(zeros) / static_cast<double>(x.numel()), 0.25, 0.02);

  Tensor again = Tensor::empty(x.shape(), DType::F32), other = Tensor::empty(x.shape(), DType::F32);
  dropout(x, again, 0.25f, 42);
  dropout(x, other, 0.25f, 43);
  EXPECT_EQ(to_float_vector(again), to_float_vector(y));
  EXPECT_NE(to_float_vector(other), to_float_vector(y));

  // A [rows, width] window of a wider buffer: the same mask as the contiguous operand.
  Tensor wide = Tensor::zeros({rows, width + 12}, DType::F32);
  Tensor window = wide.narrow(1, 5, width);
  window.copy_from(x);
  Tensor from_view = Tensor::empty(x.shape(), DType::F32);
  dropout(window, from_view, 0.25f, 42);
  EXPECT_EQ(to_float_vector(from_view), to_float_vector(y));

  Tensor sum = x.clone();
  dropout(x, sum, 0.25f, 42, /*accumulate=*/true);
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_EQ(sum.data<float>()[i], values[static_cast<size_t>(i)] + y.data<float>()[i]) << i;
  Tensor copy = Tensor::empty(x.shape(), DType::F32);
  dropout(x, copy, 0.0f, 42);
  EXPECT_EQ(to_float_vector(copy), values);
}

}  // namespace
}  // namespace nvfp4lm::test_elementwise
