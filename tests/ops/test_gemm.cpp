// gemm and linear: vs naive triple loops in double (all transpose combinations, odd sizes, alpha/beta,
// row-strided views), the linear backward vs finite differences, and the = / += conventions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/gemm.h"
#include "ops_testing.h"

namespace nvfp4lm::test_gemm {
namespace {

using test::kForwardTol;

// C = alpha op(A) op(B) + beta C in double; matrices row-major, stored shapes as given.
std::vector<double> naive_gemm(const std::vector<double>& a, int64_t a_cols, bool ta, const std::vector<double>& b,
                               int64_t b_cols, bool tb, const std::vector<double>& c, int64_t m, int64_t n, int64_t k,
                               double alpha, double beta) {
  std::vector<double> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a[static_cast<size_t>(p * a_cols + i)] : a[static_cast<size_t>(i * a_cols + p)];
        const double bv = tb ? b[static_cast<size_t>(j * b_cols + p)] : b[static_cast<size_t>(p * b_cols + j)];
        sum += av * bv;
      }
      out[static_cast<size_t>(i * n + j)] = alpha * sum + beta * c[static_cast<size_t>(i * n + j)];
    }
  return out;
}

struct GemmCase {
  int64_t m, n, k;
};

TEST(Gemm, MatchesNaiveForAllTransposes) {
  Rng rng(1);
  for (GemmCase s : {GemmCase{1, 1, 1}, GemmCase{7, 13, 5}, GemmCase{33, 17, 64}, GemmCase{2, 65, 3}}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        Tensor a = test::random_normal(ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, rng);
        Tensor b = test::random_normal(tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, rng);
        Tensor c = test::random_normal({s.m, s.n}, rng);
        const std::vector<double> expected = naive_gemm(test::to_doubles(a), a.dim(1), ta, test::to_doubles(b),
                                                        b.dim(1), tb, test::to_doubles(c), s.m, s.n, s.k, 0.7, -0.3);
        gemm(a, ta, b, tb, c, 0.7f, -0.3f);
        test::expect_near_doubles(c, expected, kForwardTol,
                                  fmt::format("gemm {}x{}x{} ta={} tb={}", s.m, s.n, s.k, ta, tb));
      }
  }
}

TEST(Gemm, RowStridedViewsReadAndWriteOnlyTheirColumns) {
  Rng rng(2);
  const int64_t m = 5, n = 6, k = 7;
  Tensor a = test::random_normal({m, k}, rng), b = test::random_normal({n, k}, rng);
  const std::vector<double> expected = naive_gemm(test::to_doubles(a), k, false, test::to_doubles(b), k, true,
                                                  std::vector<double>(m * n, 0.0), m, n, k, 1.0, 0.0);
  // A and B as column slices of fused buffers, C as the middle columns of a wider one.
  Tensor a_view = test::strided_copy(a, 4, 2), b_view = test::strided_copy(b, 3, 3);
  Tensor c_wide = Tensor::from_floats(std::vector<float>(static_cast<size_t>(m * (n + 5)), -7.f), {m, n + 5});
  Tensor c_view = c_wide.narrow(1, 1, n);
  gemm(a_view, false, b_view, true, c_view);
  test::expect_near_doubles(c_view, expected, kForwardTol, "gemm on views");
  const std::vector<float> all = to_float_vector(c_wide);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n + 5; ++j) {
      if (j >= 1 && j < 1 + n) continue;
      EXPECT_EQ(all[static_cast<size_t>(i * (n + 5) + j)], -7.f) << "column " << j << " outside the view was written";
    }
}

TEST(Gemm, BetaZeroIgnoresOldContentsAndEmptyKScales) {
  Rng rng(3);
  Tensor a = test::random_normal({3, 4}, rng), b = test::random_normal({4, 2}, rng);
  Tensor c = Tensor::from_floats(std::vector<float>(6, std::numeric_limits<float>::quiet_NaN()), {3, 2});
  gemm(a, false, b, false, c);
  for (float value : to_float_vector(c)) EXPECT_TRUE(std::isfinite(value));

  Tensor a0 = Tensor::empty({3, 0}, DType::F32), b0 = Tensor::empty({0, 2}, DType::F32);
  Tensor c0 = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {3, 2});
  gemm(a0, false, b0, false, c0, 1.f, 2.f);
  EXPECT_EQ(to_float_vector(c0), (std::vector<float>{2, 4, 6, 8, 10, 12}));
}

TEST(Gemm, ShapeMismatchIsAnError) {
  Tensor a = Tensor::zeros({3, 4}, DType::F32), b = Tensor::zeros({5, 2}, DType::F32);
  Tensor c = Tensor::zeros({3, 2}, DType::F32);
  EXPECT_THROW(gemm(a, false, b, false, c), Error);
}

// L = sum(R * (x wᵀ)) in double, for finite differences.
double linear_loss(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& r, int64_t n,
                   int64_t in, int64_t out) {
  double loss = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double y = 0;
      for (int64_t p = 0; p < in; ++p) y += x[static_cast<size_t>(i * in + p)] * w[static_cast<size_t>(o * in + p)];
      loss += r[static_cast<size_t>(i * out + o)] * y;
    }
  return loss;
}

TEST(Linear, ForwardFlattensLeadingDimsAndBackwardMatchesFiniteDifferences) {
  Rng rng(4);
  const int64_t batch = 2, seq = 3, in = 5, out = 4, n = batch * seq;
  Tensor x = test::random_normal({batch, seq, in}, rng), w = test::random_normal({out, in}, rng);
  Tensor r = test::random_normal({batch, seq, out}, rng);
  Tensor y = Tensor::empty({batch, seq, out}, DType::F32);
  linear_forward(x, w, y);
  std::vector<double> xd = test::to_doubles(x), wd = test::to_doubles(w), rd = test::to_doubles(r);
  test::expect_near_doubles(
      y, naive_gemm(xd, in, false, wd, in, true, std::vector<double>(n * out, 0.0), n, out, in, 1.0, 0.0), kForwardTol,
      "linear_forward");

  auto loss = [&] { return linear_loss(xd, wd, rd, n, in, out); };
  const std::vector<double> dx_expected = test::finite_difference(xd, loss);
  const std::vector<double> dw_expected = test::finite_difference(wd, loss);

  Tensor dx = test::random_normal({batch, seq, in}, rng);  // overwritten
  linear_backward_input(r, w, dx);
  test::expect_near_doubles(dx, dx_expected, test::kGradTol, "linear dx");

  Tensor dw = test::random_normal({out, in}, rng);  // accumulated into
  std::vector<double> dw_total = test::to_doubles(dw);
  for (size_t i = 0; i < dw_total.size(); ++i) dw_total[i] += dw_expected[i];
  linear_backward_weight(r, x, dw);
  test::expect_near_doubles(dw, dw_total, test::kGradTol, "linear dw (+=)");

  // accumulate = true adds a second dx on top of the first.
  std::vector<double> dx_twice = dx_expected;
  for (double& value : dx_twice) value *= 2;
  linear_backward_input(r, w, dx, /*accumulate=*/true);
  test::expect_near_doubles(dx, dx_twice, test::kGradTol, "linear dx (accumulate)");
}

TEST(Linear, FusedOutputSplitsIntoViews) {
  // One GEMM producing [N, q|k] equals two separate GEMMs; the halves are usable row-strided views.
  Rng rng(5);
  const int64_t n = 4, in = 6, q_out = 3, k_out = 2;
  Tensor x = test::random_normal({n, in}, rng), wq = test::random_normal({q_out, in}, rng);
  Tensor wk = test::random_normal({k_out, in}, rng);
  Tensor w_fused = Tensor::empty({q_out + k_out, in}, DType::F32);
  w_fused.narrow(0, 0, q_out).copy_from(wq);
  w_fused.narrow(0, q_out, k_out).copy_from(wk);
  Tensor fused = Tensor::empty({n, q_out + k_out}, DType::F32);
  linear_forward(x, w_fused, fused);
  Tensor q = Tensor::empty({n, q_out}, DType::F32), k = Tensor::empty({n, k_out}, DType::F32);
  linear_forward(x, wq, q);
  linear_forward(x, wk, k);
  test::expect_close(fused.narrow(1, 0, q_out), q, test::kF32Tol, "q half");
  test::expect_close(fused.narrow(1, q_out, k_out), k, test::kF32Tol, "k half");
  // Backward through a view: dx from the k half alone.
  Tensor dk = test::random_normal({n, k_out}, rng);
  Tensor dfused = Tensor::zeros({n, q_out + k_out}, DType::F32);
  dfused.narrow(1, q_out, k_out).copy_from(dk);
  Tensor dx_view = Tensor::empty({n, in}, DType::F32), dx_ref = Tensor::empty({n, in}, DType::F32);
  linear_backward_input(dfused.narrow(1, q_out, k_out), wk, dx_view);
  linear_backward_input(dk, wk, dx_ref);
  test::expect_close(dx_view, dx_ref, test::kF32Tol, "dx through a view");
}

}  // namespace
}  // namespace nvfp4lm::test_gemm
