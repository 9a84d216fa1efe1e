// RMSNorm: forward (and rstd) vs the formula in double, on contiguous tensors and on per-head views of a
// fused projection; backward vs finite differences; dx =, dweight +=, in place.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/rmsnorm.h"
#include "ops_testing.h"

namespace nvfp4lm::test_rmsnorm {
namespace {

struct NormReference {
  std::vector<double> y, rstd;
};

NormReference rmsnorm_reference(const std::vector<double>& x, const std::vector<double>& w, int64_t rows, int64_t dim,
                                double eps) {
  NormReference ref{std::vector<double>(x.size()), std::vector<double>(static_cast<size_t>(rows))};
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t j = 0; j < dim; ++j) ms += x[static_cast<size_t>(r * dim + j)] * x[static_cast<size_t>(r * dim + j)];
    const double rstd = 1.0 / std::sqrt(ms / static_cast<double>(dim) + eps);
    ref.rstd[static_cast<size_t>(r)] = rstd;
    for (int64_t j = 0; j < dim; ++j)
      ref.y[static_cast<size_t>(r * dim + j)] = x[static_cast<size_t>(r * dim + j)] * rstd * w[static_cast<size_t>(j)];
  }
  return ref;
}

TEST(RmsNorm, ForwardMatchesFormula) {
  Rng rng(20);
  const float eps = 1e-6f;
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{5, 7}, {300, 128}, {3, 1}}) {
    Tensor x = test::random_normal({rows, dim}, rng, 2.f), w = test::random_normal({dim}, rng);
    Tensor y = Tensor::empty({rows, dim}, DType::F32), rstd = Tensor::empty({rows}, DType::F32);
    rmsnorm_forward(x, w, eps, y, &rstd);
    NormReference ref = rmsnorm_reference(test::to_doubles(x), test::to_doubles(w), rows, dim, eps);
    test::expect_near_doubles(y, ref.y, test::kForwardTol, fmt::format("y [{}, {}]", rows, dim));
    test::expect_near_doubles(rstd, ref.rstd, test::kForwardTol, fmt::format("rstd [{}, {}]", rows, dim));
    rmsnorm_forward(x, w, eps, x, nullptr);  // in place
    test::expect_near_doubles(x, ref.y, test::kForwardTol, "in place");
  }
}

TEST(RmsNorm, PerHeadOnAFusedProjectionView) {
  // QK-norm: [tokens, q_heads + kv_heads, head_dim] fused buffer, normalise only the k heads (a view whose
  // token stride is the fused row) and leave the q heads untouched.
  Rng rng(21);
  const int64_t tokens = 6, q_heads = 3, kv_heads = 2, head_dim = 8;
  Tensor fused = test::random_normal({tokens, q_heads + kv_heads, head_dim}, rng);
  const std::vector<float> before = to_float_vector(fused);
  Tensor k = fused.narrow(1, q_heads, kv_heads);
  Tensor w = test::random_normal({head_dim}, rng);
  NormReference ref = rmsnorm_reference(test::to_doubles(k), test::to_doubles(w), tokens * kv_heads, head_dim, 1e-6);
  Tensor rstd = Tensor::empty({tokens, kv_heads}, DType::F32);
  rmsnorm_forward(k, w, 1e-6f, k, &rstd);
  test::expect_near_doubles(k, ref.y, test::kForwardTol, "k heads");
  test::expect_near_doubles(rstd, ref.rstd, test::kForwardTol, "k rstd");
  test::expect_close(fused.narrow(1, 0, q_heads).contiguous(),
                     Tensor::from_floats(before, fused.shape()).narrow(1, 0, q_heads).contiguous(), {0.f, 0.f},
                     "q heads untouched");
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  Rng rng(22);
  const int64_t rows = 6, dim = 9;
  const double eps = 1e-5;
  Tensor x = test::random_normal({rows, dim}, rng), w = test::random_normal({dim}, rng);
  Tensor r = test::random_normal({rows, dim}, rng);
  std::vector<double> xd = test::to_doubles(x), wd = test::to_doubles(w), rd = test::to_doubles(r);
  auto loss = [&] { return test::dot(rmsnorm_reference(xd, wd, rows, dim, eps).y, rd); };
  const std::vector<double> dx_expected = test::finite_difference(xd, loss);
  const std::vector<double> dw_expected = test::finite_difference(wd, loss);

  Tensor y = Tensor::empty({rows, dim}, DType::F32), rstd = Tensor::empty({rows}, DType::F32);
  rmsnorm_forward(x, w, static_cast<float>(eps), y, &rstd);
  Tensor dx = test::random_normal({rows, dim}, rng);  // overwritten
  Tensor dw = test::random_normal({dim}, rng);        // accumulated
  std::vector<double> dw_total = test::to_doubles(dw);
  for (size_t j = 0; j < dw_total.size(); ++j) dw_total[j] += dw_expected[j];
  rmsnorm_backward(r, x, w, rstd, dx, dw);
  test::expect_near_doubles(dx, dx_expected, test::kGradTol, "dx");
  test::expect_near_doubles(dw, dw_total, test::kGradTol, "dweight (+=)");

  // dx may be dy itself.
  Tensor dy = r.clone(), dw2 = Tensor::zeros({dim}, DType::F32);
  rmsnorm_backward(dy, x, w, rstd, dy, dw2);
  test::expect_near_doubles(dy, dx_expected, test::kGradTol, "dx in place");
  test::expect_near_doubles(dw2, dw_expected, test::kGradTol, "dweight from zero");
}

TEST(RmsNorm, BackwardOnManyRowsUsesChunksConsistently) {
  // More rows than weight chunks, strided rows: the chunked dweight sum equals a direct sum.
  Rng rng(23);
  const int64_t rows = 1000, dim = 32;
  Tensor x = test::strided_copy(test::random_normal({rows, dim}, rng), 5, 2);
  Tensor dy = test::random_normal({rows, dim}, rng), w = test::random_normal({dim}, rng);
  Tensor y = Tensor::empty({rows, dim}, DType::F32), rstd = Tensor::empty({rows}, DType::F32);
  rmsnorm_forward(x, w, 1e-6f, y, &rstd);
  Tensor dx = Tensor::empty({rows, dim}, DType::F32), dw = Tensor::zeros({dim}, DType::F32);
  rmsnorm_backward(dy, x, w, rstd, dx, dw);
  const std::vector<double> xd = test::to_doubles(x), dyd = test::to_doubles(dy), wd = test::to_doubles(w);
  const NormReference ref = rmsnorm_reference(xd, wd, rows, dim, 1e-6);
  std::vector<double> dw_expected(static_cast<size_t>(dim), 0.0), dx_expected(xd.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double rs = ref.rstd[static_cast<size_t>(r)];
    double dot = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const size_t i = static_cast<size_t>(r * dim + j);
      dw_expected[static_cast<size_t>(j)] += dyd[i] * xd[i] * rs;
      dot += dyd[i] * wd[static_cast<size_t>(j)] * xd[i];
    }
    for (int64_t j = 0; j < dim; ++j) {
      const size_t i = static_cast<size_t>(r * dim + j);
      dx_expected[i] = rs * dyd[i] * wd[static_cast<size_t>(j)] - xd[i] * rs * rs * rs * dot / dim;
    }
  }
  test::expect_near_doubles(dw, dw_expected, {1e-4f, 1e-4f}, "dweight over 1000 rows");
  test::expect_near_doubles(dx, dx_expected, test::kGradTol, "dx");
}

}  // namespace
}  // namespace nvfp4lm::test_rmsnorm
