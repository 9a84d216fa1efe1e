// LinearRows::Independent (ops/linear_rows.h) on the CPU: each row of y is bit for bit what it is when that row is
// computed alone, for dense weights (ops/cpu/dense_dot.h, every SIMD variant this CPU has) and NVFP4 weights, for
// 1..20 rows (past the 8 rows one kernel call takes, and past one weight tile), odd column counts (the masked tail)
// and a weight large enough to be split over threads; and it agrees with the Batch path (sgemm / dequant-gemm) to
// fp32 rounding.
#include <gtest/gtest.h>

#include <vector>

#include "common/test_util.h"
#include "core/rng.h"
#include "ops/cpu/dense_dot.h"
#include "ops/cross_entropy.h"
#include "ops/gemm.h"
#include "ops/nvfp4_linear.h"
#include "ops/ops_testing.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::test::test_linear_rows {
namespace {

// Two fp32 summation orders of up to ~1000 products of N(0, 1) values: sums of magnitude ~30, each order off by
// ~sqrt(K) roundings of 2^-24 relative.
constexpr Tolerance kOrderTol{2e-4f, 2e-4f};

std::vector<float> row_of(const Tensor& y, int64_t row) {
  const Tensor r = y.narrow(0, row, 1).contiguous();
  return to_float_vector(r);
}

// y for all rows at once vs each row alone: identical bits.
template <typename Linear>
void expect_rows_independent(const Tensor& x, int64_t out, const Linear& linear, const std::string& what) {
  const int64_t n = x.dim(0);
  Tensor all = Tensor::empty({n, out}, DType::F32);
  linear(x, all);
  for (int64_t r = 0; r < n; ++r) {
    Tensor alone = Tensor::empty({1, out}, DType::F32);
    linear(x.narrow(0, r, 1), alone);
    ASSERT_EQ(row_of(all, r), to_float_vector(alone)) << what << ": row " << r << " of " << n;
  }
}

TEST(LinearRows, DenseRowsDoNotDependOnTheOtherRows) {
  Rng rng(11);
  for (const auto& [out, in] : std::vector<std::pair<int64_t, int64_t>>{{37, 64}, {50, 61}, {3, 5}, {1200, 1000}}) {
    const Tensor w = random_normal({out, in}, rng);
    for (int64_t n : {1, 2, 7, 8, 9, 16, 20}) {
      const Tensor x = random_normal({n, in}, rng);
      const std::string what = fmt::format("dense [{}, {}] with {} rows", out, in, n);
      expect_rows_independent(
          x, out, [&](const Tensor& xs, Tensor& y) { linear_forward(xs, w, y, LinearRows::Independent); }, what);
      Tensor independent = Tensor::empty({n, out}, DType::F32), batch = Tensor::empty({n, out}, DType::F32);
      linear_forward(x, w, independent, LinearRows::Independent);
      linear_forward(x, w, batch, LinearRows::Batch);
      expect_close(independent, batch, kOrderTol, what + " vs sgemm");
    }
  }
}

TEST(LinearRows, LmHeadLogitsTakeTheRowsMode) {
  Rng rng(12);
  const Tensor lm_head = random_normal({300, 48}, rng);
  const Tensor hidden = random_normal({11, 48}, rng);
  expect_rows_independent(
      hidden, 300,
      [&](const Tensor& h, Tensor& logits) { lm_head_logits(h, lm_head, logits, LinearRows::Independent); }, "lm_head");
}

TEST(LinearRows, EveryDenseDotVariantMatchesADoubleSum) {
  Rng rng(13);
  const int64_t out = 9, in = 83;  // 83: a masked tail for 8 and 16 lanes
  const Tensor w = random_normal({out, in}, rng);
  const Tensor x = random_normal({3, in}, rng);
  std::vector<double> expected;
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0;
      for (int64_t k = 0; k < in; ++k)
        sum += static_cast<double>(x.data<float>()[r * in + k]) * w.data<float>()[o * in + k];
      expected.push_back(sum);
    }
  for (const cpu::DenseDotFamily::Variant* variant : cpu::dense_dot_family().runnable()) {
    std::vector<float> y(static_cast<size_t>(3 * out), -7.0f);
    const float* x_rows[3] = {x.data<float>(), x.data<float>() + in, x.data<float>() + 2 * in};
    float* y_rows[3] = {y.data(), y.data() + out, y.data() + 2 * out};
    cpu::dense_dot_rows(*variant, {w.data<float>(), in, in}, 0, out, x_rows, y_rows, 3);
    expect_close(y, std::vector<float>(expected.begin(), expected.end()), kForwardTol, variant->name());
  }
}

TEST(LinearRows, Nvfp4RowsDoNotDependOnTheOtherRows) {
  Rng rng(14);
  for (const auto& [out, in] : std::vector<std::pair<int64_t, int64_t>>{{40, 64}, {1536, 1024}}) {
    const Nvfp4Tensor w = quantize_nvfp4(random_normal({out, in}, rng));
    Tensor scratch = Tensor::empty({nvfp4_linear_scratch_elements(w)}, DType::F32);
    for (int64_t n : {1, 5, 8, 9, 13, 17}) {
      const Tensor x = random_normal({n, in}, rng);
      const std::string what = fmt::format("NVFP4 [{}, {}] with {} rows", out, in, n);
      expect_rows_independent(
          x, out,
          [&](const Tensor& xs, Tensor& y) { nvfp4_linear_forward(xs, w, y, scratch, LinearRows::Independent); }, what);
      Tensor independent = Tensor::empty({n, out}, DType::F32), batch = Tensor::empty({n, out}, DType::F32);
      nvfp4_linear_forward(x, w, independent, scratch, LinearRows::Independent);
      nvfp4_linear_forward(x, w, batch, scratch, LinearRows::Batch);
      expect_close(independent, batch, kOrderTol, what + " vs dequant-gemm");
    }
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_linear_rows
