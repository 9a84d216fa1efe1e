// RoPE: inv_freq and cos/sin equal Hugging Face's fp32 values (constants printed by PyTorch 1.13 from
// Qwen3RotaryEmbedding's formulas), the rotation vs the formula in double, table == per-call angles, views,
// backward = inverse rotation = finite-difference gradient, positions outside the table are Errors.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/rope.h"
#include "ops_testing.h"

namespace nvfp4lm::test_rope {
namespace {

// x [rows, heads, dim] rotated in double by the fp32 angles HF computes.
std::vector<double> rope_reference(const std::vector<double>& x, const std::vector<int32_t>& positions, int64_t heads,
                                   int64_t dim, float theta, bool inverse = false) {
  const std::vector<float> inv_freq = rope_inv_freq(dim, theta);
  std::vector<double> out(x.size());
  const int64_t half = dim / 2;
  for (size_t n = 0; n < positions.size(); ++n)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(positions[n]) * inv_freq[static_cast<size_t>(i)];
        const double c = std::cos(static_cast<double>(angle));
        const double s = (inverse ? -1 : 1) * std::sin(static_cast<double>(angle));
        const size_t base = (n * static_cast<size_t>(heads) + static_cast<size_t>(h)) * static_cast<size_t>(dim);
        const double a = x[base + static_cast<size_t>(i)], b = x[base + static_cast<size_t>(i + half)];
        out[base + static_cast<size_t>(i)] = a * c - b * s;
        out[base + static_cast<size_t>(i + half)] = b * c + a * s;
      }
  return out;
}

TEST(Rope, InvFreqAndAnglesMatchHuggingFace) {
  // torch: 1.0 / (5e6 ** (torch.arange(0, 128, 2, dtype=torch.int64).float() / 128)), entries 0, 1, 17, 63
  const std::vector<float> inv_freq = rope_inv_freq(128, 5e6f);
  ASSERT_EQ(inv_freq.size(), 64u);
  EXPECT_EQ(inv_freq[0], 1.0f);
  EXPECT_NEAR(inv_freq[1], 0x1.92585p-1f, 1e-7f);
  EXPECT_NEAR(inv_freq[17], 0x1.10461ep-6f, 1e-7f * 0x1p-6f);
  EXPECT_NEAR(inv_freq[63], 0x1.11469ep-22f, 1e-7f * 0x1p-22f);

  // cos/sin of positions 30000, 7, 123456 (emb.cos(), emb.sin() in HF), read off by rotating unit vectors:
  // x1 = 1, x2 = 0 gives x1' = cos, x2' = sin. Large positions check the fp32 angle rounding.
  const std::vector<int32_t> pos{30000, 7, 123456};
  const std::vector<std::vector<std::pair<float, float>>> expected{{{-0x1.315f36p-1f, -0x1.9af6f6p-1f},
                                                                    {0x1.d9b994p-1f, 0x1.847a3ep-2f},
                                                                    {-0x1.239cd0p-1f, 0x1.a4d6fcp-1f},
                                                                    {0x1.fffc2ep-1f, 0x1.f460d0p-8f}},
                                                                   {{0x1.81ff7ap-1f, 0x1.50608cp-1f},
                                                                    {0x1.6b21a8p-1f, -0x1.68f14cp-1f},
                                                                    {0x1.fc8a28p-1f, 0x1.db67c8p-4f},
                                                                    {0x1.000000p+0f, 0x1.de3b94p-20f}},
                                                                   {{-0x1.583708p-1f, -0x1.7b066ep-1f},
                                                                    {-0x1.fdc900p-1f, 0x1.7c932ep-4f},
                                                                    {-0x1.f8ec36p-1f, -0x1.53578ep-3f},
                                                                    {0x1.ffbf4ep-1f, 0x1.015accp-5f}}};
  Tensor x = Tensor::zeros({3, 1, 128}, DType::F32);
  float* p = x.data<float>();
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t i = 0; i < 64; ++i) p[n * 128 + i] = 1.f;
  rope_forward(x, Tensor::from_ints(pos, {3}), 5e6f);
  const int indices[4] = {0, 1, 17, 63};
  for (size_t n = 0; n < 3; ++n)
    for (int k = 0; k < 4; ++k) {
      const float c = p[n * 128 + static_cast<size_t>(indices[k])],
                  s = p[n * 128 + 64 + static_cast<size_t>(indices[k])];
      EXPECT_NEAR(c, expected[n][static_cast<size_t>(k)].first, 3e-7f)
          << "cos, position " << pos[n] << " i " << indices[k];
      EXPECT_NEAR(s, expected[n][static_cast<size_t>(k)].second, 3e-7f)
          << "sin, position " << pos[n] << " i " << indices[k];
    }
}

TEST(Rope, RotationMatchesFormulaWithTableAndWithoutOnViews) {
  Rng rng(30);
  const int64_t tokens = 7, q_heads = 3, kv_heads = 2, dim = 10;
  const float theta = 10000.f;
  std::vector<int32_t> pos(tokens);
  for (auto& v : pos) v = static_cast<int32_t>(rng.below(50));
  Tensor positions = Tensor::from_ints(pos, {tokens});
  // q and k as views of a fused [tokens, q|k|v heads, dim] buffer.
  Tensor fused = test::random_normal({tokens, q_heads + 2 * kv_heads, dim}, rng);
  Tensor q = fused.narrow(1, 0, q_heads), k = fused.narrow(1, q_heads, kv_heads);
  Tensor v_before = fused.narrow(1, q_heads + kv_heads, kv_heads).contiguous();
  const std::vector<double> q_expected = rope_reference(test::to_doubles(q), pos, q_heads, dim, theta);
  const std::vector<double> k_expected = rope_reference(test::to_doubles(k), pos, kv_heads, dim, theta);
  RopeTable table(dim, theta, 64);
  rope_forward(q, positions, table);
  rope_forward(k, positions, theta);
  test::expect_near_doubles(q, q_expected, test::kForwardTol, "q (table)");
  test::expect_near_doubles(k, k_expected, test::kForwardTol, "k (theta)");
  test::expect_close(fused.narrow(1, q_heads + kv_heads, kv_heads).contiguous(), v_before, {0.f, 0.f}, "v untouched");

  // The table and the per-call angles agree exactly.
  Tensor a = test::random_normal({tokens, 2, dim}, rng), b = a.clone();
  rope_forward(a, positions, table);
  rope_forward(b, positions, theta);
  test::expect_close(a, b, {0.f, 0.f}, "table vs theta");
}

TEST(Rope, FourDimensionalInputWithBatchPositions) {
  Rng rng(31);
  const int64_t batch = 2, seq = 3, heads = 2, dim = 4;
  std::vector<int32_t> pos{0, 1, 2, 5, 6, 7};
  Tensor x = test::random_normal({batch, seq, heads, dim}, rng);
  const std::vector<double> expected = rope_reference(test::to_doubles(x), pos, heads, dim, 1e6f);
  rope_forward(x, Tensor::from_ints(pos, {batch, seq}), RopeTable(dim, 1e6f, 8));
  test::expect_near_doubles(x, expected, test::kForwardTol, "[B, T, H, D]");
}

TEST(Rope, BackwardIsTheInverseAndMatchesFiniteDifferences) {
  Rng rng(32);
  const int64_t tokens = 4, heads = 2, dim = 6;
  const float theta = 100.f;
  std::vector<int32_t> pos{3, 0, 17, 9};
  Tensor positions = Tensor::from_ints(pos, {tokens});
  Tensor x = test::random_normal({tokens, heads, dim}, rng), r = test::random_normal({tokens, heads, dim}, rng);
  std::vector<double> xd = test::to_doubles(x);
  const std::vector<double> rd = test::to_doubles(r);
  auto loss = [&] { return test::dot(rope_reference(xd, pos, heads, dim, theta), rd); };
  const std::vector<double> dx_expected = test::finite_difference(xd, loss);
  Tensor dx = r.clone();
  rope_backward(dx, positions, theta);
  test::expect_near_doubles(dx, dx_expected, test::kGradTol, "dx");

  RopeTable table(dim, theta, 20);
  Tensor y = x.clone();
  rope_forward(y, positions, table);
  rope_backward(y, positions, table);
  test::expect_close(y, x, {1e-6f, 1e-5f}, "backward(forward(x)) == x");
}

TEST(Rope, PositionOutsideTheTableIsAnError) {
  RopeTable table(4, 1e4f, 8);
  Tensor x = Tensor::zeros({2, 1, 4}, DType::F32);
  Tensor bad = Tensor::from_ints({3, 8}, {2});
  EXPECT_THROW(rope_forward(x, bad, table), Error);
  Tensor negative = Tensor::from_ints({-1, 0}, {2});
  EXPECT_THROW(rope_backward(x, negative, table), Error);
}

}  // namespace
}  // namespace nvfp4lm::test_rope
