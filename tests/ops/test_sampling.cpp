// ops/sampling.h on the CPU: argmax (ties, NaN, -inf rows) and top-k / top-p sampling against the definition
// written out naively here (sort by value, keep ties, exact integer masses): over a fine grid of uniforms every
// draw lies in the kept set and each kept token is drawn with frequency W / W(kept) (within the grid's
// resolution); option errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <vector>

#include "common/test_util.h"
#include "core/rng.h"
#include "ops/cpu/sampling.h"
#include "ops/sampling.h"

namespace nvfp4lm::test_sampling {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Sampling, ArgmaxTakesTheLowestIdOnTiesAndIgnoresNaN) {
  const std::vector<float> rows{1.f,   3.f,   3.f,   -2.f,    // tie: 1
                                kNaN,  -1.f,  kNaN,  -0.5f,   // NaN ignored: 3
                                kNaN,  kNaN,  kNaN,  kNaN,    // nothing: 0
                                -kInf, -kInf, -kInf, -kInf};  // all -inf: the first, 0
  Tensor logits = Tensor::from_floats(rows, {4, 4});
  Tensor ids = Tensor::from_ints({-1, -1, -1, -1}, {4});
  sample_argmax(logits, ids);
  const int32_t* id = ids.data<int32_t>();
  EXPECT_EQ(id[0], 1);
  EXPECT_EQ(id[1], 3);
  EXPECT_EQ(id[2], 0);
  EXPECT_EQ(id[3], 0);
}

// The kept set and weights by the definition in ops/sampling.h, computed the slow way.
std::map<int32_t, uint64_t> kept_tokens(const std::vector<float>& row, const TopKTopP& options) {
  const int64_t vocab = static_cast<int64_t>(row.size());
  std::vector<float> z(row.size());
  float max_z = -kInf;
  for (size_t i = 0; i < row.size(); ++i) {
    z[i] = std::isnan(row[i]) ? -kInf : row[i] / options.temperature;
    max_z = std::max(max_z, z[i]);
  }
  std::vector<float> sorted = z;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  float threshold = -kInf;
  if (options.top_k > 0 && options.top_k < vocab) threshold = sorted[static_cast<size_t>(options.top_k - 1)];
  uint64_t mass_k = 0;
  for (float v : z)
    if (v >= threshold) mass_k += cpu::sampling_weight(v, max_z);
  if (options.top_p < 1.f) {
    const auto target = static_cast<uint64_t>(std::ceil(static_cast<double>(options.top_p) * mass_k));
    uint64_t cumulative = 0;
    for (float v : sorted) {
      if (v < threshold) break;
      cumulative += cpu::sampling_weight(v, max_z);
      if (cumulative >= target) {
        threshold = v;
        break;
      }
    }
  }
  std::map<int32_t, uint64_t> kept;
  for (size_t i = 0; i < z.size(); ++i)
    if (z[i] >= threshold && cpu::sampling_weight(z[i], max_z) > 0)
      kept[static_cast<int32_t>(i)] = cpu::sampling_weight(z[i], max_z);
  return kept;
}

void check_distribution(const std::vector<float>& row, const TopKTopP& options) {
  SCOPED_TRACE(
      fmt::format("V={} T={} top-k {} top-p {}", row.size(), options.temperature, options.top_k, options.top_p));
  const std::map<int32_t, uint64_t> kept = kept_tokens(row, options);
  uint64_t total = 0;
  for (const auto& [id, w] : kept) total += w;
  constexpr int64_t kDraws = 4000;  // u on a grid: each kept token gets its share within 2 grid steps
  std::vector<float> rows, uniforms;
  for (int64_t j = 0; j < kDraws; ++j) {
    rows.insert(rows.end(), row.begin(), row.end());
    uniforms.push_back((static_cast<float>(j) + 0.5f) / kDraws);
  }
  const auto vocab = static_cast<int64_t>(row.size());
  Tensor logits = Tensor::from_floats(rows, {kDraws, vocab});
  Tensor u = Tensor::from_floats(uniforms, {kDraws});
  Tensor ids = Tensor::empty({kDraws}, DType::I32);
  sample_top_k_top_p(logits, u, options, ids);
  std::map<int32_t, int64_t> drawn;
  for (int64_t j = 0; j < kDraws; ++j) ++drawn[ids.data<int32_t>()[j]];
  for (const auto& [id, count] : drawn) EXPECT_TRUE(kept.count(id)) << "token " << id << " is outside the kept set";
  for (const auto& [id, w] : kept) {
    const double expected = static_cast<double>(w) / static_cast<double>(total) * kDraws;
    const double got = drawn.count(id) ? static_cast<double>(drawn[id]) : 0.0;
    EXPECT_LE(std::fabs(got - expected), 2.0) << "token " << id;
  }
}

TEST(Sampling, TopKTopPDrawsFollowTheDefinition) {
  Rng rng(7);
  std::vector<float> row(300);
  // Logits on a 0.25 grid: plenty of exact ties at the top-k and top-p boundaries.
  for (float& v : row) v = std::round(test::random_normal({1}, rng, 2.f).data<float>()[0] * 4.f) / 4.f;
  row[17] = kNaN;
  row[18] = -kInf;
  check_distribution(row, {1.f, 0, 1.f});
  check_distribution(row, {0.7f, 20, 1.f});
  check_distribution(row, {0.7f, 20, 0.8f});
  check_distribution(row, {1.3f, 0, 0.5f});
  check_distribution(row, {1.f, 1, 1.f});
  check_distribution(row, {1.f, 0, 1e-6f});    // the most likely value only (with its ties)
  check_distribution(row, {0.5f, 500, 0.9f});  // top-k larger than the vocabulary: off
}

TEST(Sampling, RowWithNothingToDrawGivesZero) {
  Tensor logits = Tensor::from_floats({kNaN, -kInf, kNaN}, {1, 3});
  Tensor u = Tensor::from_floats({0.5f}, {1});
  Tensor ids = Tensor::from_ints({-1}, {1});
  sample_top_k_top_p(logits, u, {1.f, 0, 0.9f}, ids);
  EXPECT_EQ(ids.data<int32_t>()[0], 0);
}

TEST(Sampling, InvalidOptionsAreErrors) {
  Tensor logits = Tensor::from_floats({1.f, 2.f}, {1, 2});
  Tensor u = Tensor::from_floats({0.5f}, {1});
  Tensor ids = Tensor::from_ints({0}, {1});
  EXPECT_THROW(sample_top_k_top_p(logits, u, {0.f, 0, 1.f}, ids), Error);
  EXPECT_THROW(sample_top_k_top_p(logits, u, {1.f, -1, 1.f}, ids), Error);
  EXPECT_THROW(sample_top_k_top_p(logits, u, {1.f, 0, 0.f}, ids), Error);
  EXPECT_THROW(sample_top_k_top_p(logits, u, {1.f, 0, 1.5f}, ids), Error);
}

}  // namespace
}  // namespace nvfp4lm::test_sampling
