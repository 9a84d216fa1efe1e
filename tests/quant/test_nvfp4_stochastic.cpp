// NVFP4 stochastic rounding: element (r, c) uses counter_uniform(seed, r * cols + c), so results are
// reproducible for a seed and independent of threading; over many seeds the decoded mean is the input
// (unbiased) within a statistical bound computed from each element's Bernoulli variance.
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "core/rng.h"
#include "quant/nvfp4.h"
#include "quant/nvfp4_test_util.h"

namespace nvfp4lm::test_nvfp4_stochastic {
namespace {

Nvfp4QuantOptions stochastic(uint64_t seed, Nvfp4Block block = Nvfp4Block::Row1x16) {
  Nvfp4QuantOptions options;
  options.block = block;
  options.rounding = Rounding::Stochastic;
  options.seed = seed;
  return options;
}

TEST(Nvfp4Stochastic, ReproducibleForASeedAndMatchesTheCounterFormula) {
  Rng rng(1);
  Tensor x = test::random_normal({32, 64}, rng);
  for (Nvfp4Block block : {Nvfp4Block::Row1x16, Nvfp4Block::Tile16x16}) {
    const bool tile = block == Nvfp4Block::Tile16x16;
    Nvfp4Tensor a = quantize_nvfp4(x, stochastic(42, block));
    Nvfp4Tensor b = quantize_nvfp4(x, stochastic(42, block));
    Nvfp4Tensor c = quantize_nvfp4(x, stochastic(43, block));
    EXPECT_EQ(test::codes_of(a), test::codes_of(b));
    EXPECT_NE(test::codes_of(a), test::codes_of(c));
    EXPECT_EQ(test::scales_of(a), test::scales_of(c));  // scales do not depend on the rounding
    const test::ReferenceQuant ref = test::reference_quantize(to_float_vector(x), 32, 64, tile, true, 42);
    EXPECT_EQ(test::codes_of(a), ref.codes);
    EXPECT_EQ(test::scales_of(a), ref.scales);
  }
  // Nearest-even ignores the seed.
  Nvfp4QuantOptions rne;
  rne.seed = 5;
  EXPECT_EQ(test::codes_of(quantize_nvfp4(x, rne)), test::codes_of(quantize_nvfp4(x)));
}

TEST(Nvfp4Stochastic, MeanOverSeedsIsTheInput) {
  // Tensor amax 2688 makes the tensor scale exactly 1; each other block starts with 6, so its scale byte is
  // exactly 1.0 and decoded values are grid points. Then |x| <= 6 in every block: no saturation, and rounding
  // between grid neighbours lo < |x| < hi is up with probability p = (|x| - lo) / (hi - lo).
  constexpr int64_t kRows = 8, kCols = 64;
  constexpr int kSeeds = 2000;
  Rng rng(2);
  Tensor x = test::random_uniform({kRows, kCols}, rng, -6.0f, 6.0f);
  float* p = x.data<float>();
  p[0] = 2688.0f;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t b = (r == 0 ? 1 : 0); b < kCols / 16; ++b) p[r * kCols + b * 16] = 6.0f;
  std::vector<double> sum(static_cast<size_t>(kRows * kCols), 0.0);
  for (int seed = 0; seed < kSeeds; ++seed) {
    Nvfp4Tensor q = quantize_nvfp4(x, stochastic(static_cast<uint64_t>(seed) * 7919 + 1));
    ASSERT_EQ(q.tensor_scale, 1.0f);
    const std::vector<float> deq = to_float_vector(dequantize_nvfp4(q, DType::F32));
    for (size_t i = 0; i < deq.size(); ++i) sum[i] += deq[i];
  }
  double z_sum = 0, variance_sum = 0;
  int checked = 0;
  for (int64_t i = 16; i < kRows * kCols; ++i) {  // row 0 block 0 holds the 2688
    const double value = p[i], a = std::fabs(value);
    const double lo = a < 2 ? std::floor(a * 2) / 2 : (a < 4 ? std::floor(a) : 4.0);
    const double step = a < 2 ? 0.5 : (a < 4 ? 1.0 : 2.0);
    const double up = (a - lo) / step;
    const double sigma = step * std::sqrt(up * (1 - up) / kSeeds);  // std of the mean of kSeeds roundings
    const double mean = sum[static_cast<size_t>(i)] / kSeeds;
    EXPECT_LE(std::fabs(mean - value), 5 * sigma + 1e-6) << "element " << i << " x " << value;
    z_sum += mean - value;
    variance_sum += sigma * sigma;
    ++checked;
  }
  // All elements together: the total bias is within 5 standard deviations too.
  EXPECT_LE(std::fabs(z_sum), 5 * std::sqrt(variance_sum)) << checked << " elements";
}

TEST(Nvfp4Stochastic, OnlyTheTwoGridNeighboursOccur) {
  Rng rng(3);
  Tensor x = test::random_normal({16, 32}, rng);
  Nvfp4Tensor nearest = quantize_nvfp4(x);
  const std::vector<float> v = to_float_vector(x);
  const std::vector<uint8_t> scales = test::scales_of(nearest);
  for (int seed = 0; seed < 20; ++seed) {
    Nvfp4Tensor q = quantize_nvfp4(x, stochastic(static_cast<uint64_t>(seed)));
    ASSERT_EQ(test::scales_of(q), scales);
    const std::vector<uint8_t> codes = test::codes_of(q);
    for (size_t i = 0; i < v.size(); ++i) {
      const float y = v[i] / nvfp4_dequant_scale(scales[i / 16], q.tensor_scale);
      const float value = e2m1_to_float(codes[i]);
      // The decoded code is within one grid step of y and on y's side of zero (or zero).
      ASSERT_LE(std::fabs(value - y), 2 * test::e2m1_half_step(std::fmin(std::fabs(y), 6.0f)) + 1e-6f) << i;
      ASSERT_TRUE(value == 0.0f || (value > 0) == (y > 0)) << i;
    }
  }
}

}  // namespace
}  // namespace nvfp4lm::test_nvfp4_stochastic
