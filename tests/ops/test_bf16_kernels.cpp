// The CPU's BF16 kernels (ops/cpu/bf16_gemm.h, ops/cpu/bf16_dot.h) and the ops built on them: every variant this
// CPU can run against a double-precision sum of the same terms (BF16-rounded activations for the GEMM, fp32 ones for
// the dot products), over odd shapes (tile tails in tokens and weight rows, K not a multiple of anything but 2); the
// NVFP4 -> BF16 row dequantization bit for bit; and the stated bound of the fast path against the fp32 reference:
// |y_bf16 - y_fp32| <= 2^-9 * Σ_k |x_k w_k| (+ fp32 summation).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "core/numeric.h"
#include "core/rng.h"
#include "ops/cpu/bf16_dot.h"
#include "ops/cpu/bf16_gemm.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/nvfp4_linear.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::test::test_bf16_kernels {
namespace {

std::vector<uint16_t> random_bf16(int64_t count, Rng& rng) {
  std::vector<uint16_t> bits(static_cast<size_t>(count));
  for (uint16_t& b : bits) b = float_to_bf16(rng.normal() * 0.1f);
  return bits;
}

std::vector<float> random_floats(int64_t count, Rng& rng) {
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = rng.normal();
  return values;
}

// The runnable variants of a family; every variant that is not runnable here is named once in the test log.
template <typename Family>
std::vector<const typename Family::Variant*> variants_under_test(const Family& family) {
  for (const cpu::CpuIsa* isa : family.isas())
    if (!cpu::cpu_can_run(*isa))
      std::printf("note: this CPU cannot run the %s %s kernels; that variant is not tested here\n", isa->name,
                  family.name());
  return family.runnable();
}

TEST(Bf16Gemm, EveryVariantSumsTheBf16Products) {
  const std::vector<const cpu::Bf16GemmFamily::Variant*> variants = variants_under_test(cpu::bf16_gemm_family());
  ASSERT_TRUE(variants.back()->isa->portable());
  Rng rng(11);
  for (const int64_t m : {1, 9, 16, 17, 63, 64, 65, 130}) {
    for (const int64_t n : {1, 5, 6, 7, 13}) {
      for (const int64_t k : {2, 16, 34, 160}) {
        const std::vector<float> x = random_floats(m * k, rng);
        const std::vector<uint16_t> w = random_bf16(n * (k + 3), rng);  // rows k + 3 apart
        const float scale = 0.37f;
        cpu::PackedActivations packed;
        cpu::pack_activations(x.data(), k, m, k, packed);
        for (const cpu::Bf16GemmFamily::Variant* variant : variants) {
          std::vector<float> y(static_cast<size_t>(m * (n + 2)), -7.0f);  // two extra columns stay untouched
          cpu::bf16_gemm(*variant, packed, w.data(), k + 3, n, scale, y.data(), n + 2);
          for (int64_t r = 0; r < m; ++r) {
            for (int64_t o = 0; o < n; ++o) {
              double sum = 0, magnitude = 0;
              for (int64_t c = 0; c < k; ++c) {
                const double term =
                    static_cast<double>(bf16_to_float(float_to_bf16(x[r * k + c]))) * bf16_to_float(w[o * (k + 3) + c]);
                sum += term;
                magnitude += std::abs(term);
              }
              ASSERT_NEAR(y[r * (n + 2) + o], scale * sum, scale * (1e-6 * magnitude + 1e-30))
                  << variant->name() << " m=" << m << " n=" << n << " k=" << k << " at " << r << "," << o;
            }
            EXPECT_EQ(y[r * (n + 2) + n], -7.0f);
            EXPECT_EQ(y[r * (n + 2) + n + 1], -7.0f);
          }
        }
      }
    }
  }
}

TEST(Bf16Gemm, PacksPairsOfRoundedActivationsPerToken) {
  const std::vector<float> x = {1.0f, 1.00390625f, -2.5f, 3.0e-3f,  // row 0: 1 + 2^-8 is a tie: rounds to 1
                                0.1f, 0.2f,        7.0f,  -0.0f};   // row 1
  cpu::PackedActivations packed;
  cpu::pack_activations(x.data(), 4, 2, 4, packed);
  ASSERT_EQ(packed.rows_padded, 16);
  ASSERT_EQ(packed.pairs.size(), 2u * 16u);
  for (int64_t kp = 0; kp < 2; ++kp) {
    for (int64_t m = 0; m < 16; ++m) {
      const uint32_t pair = packed.pairs[static_cast<size_t>(kp * 16 + m)];
      if (m >= 2) {
        EXPECT_EQ(pair, 0u) << "padding";
        continue;
      }
      EXPECT_EQ(pair & 0xFFFF, float_to_bf16(x[static_cast<size_t>(m * 4 + 2 * kp)]));
      EXPECT_EQ(pair >> 16, float_to_bf16(x[static_cast<size_t>(m * 4 + 2 * kp + 1)]));
    }
  }
  EXPECT_EQ(packed.pairs[0] & 0xFFFF, 0x3F80u);  // the tie went to even
}

TEST(Bf16Gemm, Nvfp4RowsDequantizeExactlyToBf16) {
  Rng rng(3);
  for (const int64_t cols : {16, 48, 160}) {
    std::vector<uint8_t> codes(static_cast<size_t>(cols / 2)), scales(static_cast<size_t>(cols / 16));
    for (uint8_t& c : codes) c = static_cast<uint8_t>(rng.below(256));
    for (uint8_t& s : scales) {
      s = static_cast<uint8_t>(rng.below(256));
      if ((s & 0x7F) == 0x7F) s = 0x01;  // NaN bytes never reach a kernel; the smallest subnormal instead
    }
    for (const cpu::Bf16GemmFamily::Variant* variant : cpu::bf16_gemm_family().runnable()) {
      std::vector<uint16_t> out(static_cast<size_t>(cols));
      cpu::dequantize_nvfp4_row_bf16(*variant, codes.data(), scales.data(), cols, out.data());
      for (int64_t k = 0; k < cols; ++k) {
        const uint8_t code = (codes[static_cast<size_t>(k / 2)] >> (k % 2 ? 4 : 0)) & 0xF;
        const float exact = e2m1_to_float(code) * e4m3_to_float(scales[static_cast<size_t>(k / 16)]);
        EXPECT_EQ(bf16_to_float(out[static_cast<size_t>(k)]), exact) << variant->name() << " " << k;
      }
    }
  }
}

TEST(Bf16Dot, EveryVariantSumsFp32ActivationsTimesBf16Weights) {
  Rng rng(5);
  for (const int64_t cols : {7, 32, 40, 100, 2560}) {
    const int64_t out = 11, ld = cols + 5;
    const std::vector<uint16_t> w = random_bf16(out * ld, rng);
    for (int n = 1; n <= 8; ++n) {
      const std::vector<float> x = random_floats(n * cols, rng);
      std::vector<const float*> x_rows;
      for (int r = 0; r < n; ++r) x_rows.push_back(x.data() + r * cols);
      for (const cpu::Bf16DotFamily::Variant* variant : variants_under_test(cpu::bf16_dot_family())) {
        std::vector<float> y(static_cast<size_t>(n * out), -7.0f);
        std::vector<float*> y_rows;
        for (int r = 0; r < n; ++r) y_rows.push_back(y.data() + r * out);
        cpu::bf16_dot_rows(*variant, cpu::Bf16Rows{w.data(), ld, cols}, 2, out, x_rows.data(), y_rows.data(), n);
        for (int r = 0; r < n; ++r) {
          EXPECT_EQ(y[static_cast<size_t>(r * out)], -7.0f) << "rows before `first` are not written";
          for (int64_t o = 2; o < out; ++o) {
            double sum = 0, magnitude = 0;
            for (int64_t c = 0; c < cols; ++c) {
              const double term = static_cast<double>(x[r * cols + c]) * bf16_to_float(w[o * ld + c]);
              sum += term;
              magnitude += std::abs(term);
            }
            ASSERT_NEAR(y[r * out + o], sum, 1e-6 * magnitude + 1e-30)
                << variant->name() << " cols=" << cols << " n=" << n << " row " << r << " out " << o;
          }
        }
      }
    }
  }
}

// A random NVFP4 weight (all codes, positive scales around 2^-4) and its fp32 dequantization.
Nvfp4Tensor random_nvfp4(int64_t rows, int64_t cols, Rng& rng) {
  Nvfp4Tensor w;
  w.rows = rows;
  w.cols = cols;
  w.tensor_scale = 0.013f;
  w.codes = Tensor::empty({rows, cols / 2}, DType::E2M1x2);
  w.block_scales = Tensor::empty({rows, cols / 16}, DType::E4M3);
  auto* codes = static_cast<uint8_t*>(w.codes.raw());
  for (int64_t i = 0; i < w.codes.numel(); ++i) codes[i] = static_cast<uint8_t>(rng.below(256));
  auto* scales = static_cast<uint8_t*>(w.block_scales.raw());
  for (int64_t i = 0; i < w.block_scales.numel(); ++i) scales[i] = static_cast<uint8_t>(0x20 + rng.below(0x30));
  return w;
}

// The fast path's bound against the fp32 reference: each activation moves by at most 2^-9 of itself.
void expect_within_bf16_bound(const Tensor& fast, const Tensor& reference, const Tensor& x, const Tensor& dense) {
  const int64_t m = x.dim(0), k = x.dim(1), n = dense.dim(0);
  double worst = 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t o = 0; o < n; ++o) {
      double magnitude = 0;
      for (int64_t c = 0; c < k; ++c)
        magnitude += std::abs(static_cast<double>(x.data<float>()[r * k + c]) * dense.data<float>()[o * k + c]);
      const double diff = std::abs(fast.data<float>()[r * n + o] - reference.data<float>()[r * n + o]);
      ASSERT_LE(diff, (std::ldexp(1.0, -9) + 4e-6) * magnitude) << r << "," << o;
      worst = std::max(worst, diff / magnitude);
    }
  EXPECT_GT(worst, 0) << "the fast path rounds its activations: it differs somewhere";
}

TEST(CpuMatmul, Nvfp4LinearBf16PathStaysWithinItsBoundOfTheReference) {
  Rng rng(9);
  // {40, 600, 64}: 100 tiles, so every OpenMP thread takes some (each must read the caller's packed activations).
  for (const auto& [m, out, in] :
       {std::tuple<int64_t, int64_t, int64_t>{9, 13, 48}, {70, 32, 256}, {33, 7, 160}, {40, 600, 64}}) {
    const Nvfp4Tensor w = random_nvfp4(out, in, rng);
    const Tensor x = random_normal({m, in}, rng);
    Tensor scratch = Tensor::empty({nvfp4_linear_scratch_elements(w)}, DType::F32);
    Tensor reference = Tensor::empty({m, out}, DType::F32), fast = Tensor::empty({m, out}, DType::F32);
    nvfp4_linear_forward(x, w, reference, scratch, LinearRows::Batch, CpuMatmul::Fp32);
    fill(fast, std::nanf(""));  // every output must be written
    nvfp4_linear_forward(x, w, fast, scratch, LinearRows::Batch, CpuMatmul::Bf16Activations);
    expect_within_bf16_bound(fast, reference, x, dequantize_nvfp4(w, DType::F32));
    // Few rows (a decode step) take the same fp32 kernel in both modes: equal bit for bit.
    const Tensor row = x.narrow(0, 0, 3);
    Tensor a = Tensor::empty({3, out}, DType::F32), b = Tensor::empty({3, out}, DType::F32);
    nvfp4_linear_forward(row, w, a, scratch, LinearRows::Batch, CpuMatmul::Fp32);
    nvfp4_linear_forward(row, w, b, scratch, LinearRows::Batch, CpuMatmul::Bf16Activations);
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  }
}

TEST(CpuMatmul, Bf16LmHeadMatchesItsFp32WideningInBothModes) {
  Rng rng(12);
  const int64_t vocab = 1500, hidden = 64;
  const std::vector<uint16_t> bits = random_bf16(vocab * hidden, rng);
  Tensor table = Tensor::empty({vocab, hidden}, DType::BF16);
  std::memcpy(table.raw(), bits.data(), table.nbytes());
  Tensor wide = Tensor::empty({vocab, hidden}, DType::F32);
  convert_cpu(table, wide);
  for (const int64_t m : {1, 8, 20}) {
    const Tensor x = random_normal({m, hidden}, rng);
    Tensor reference = Tensor::empty({m, vocab}, DType::F32);
    lm_head_logits(x, wide, reference);  // sgemm on the F32 copy
    Tensor fp32 = Tensor::empty({m, vocab}, DType::F32), fast = Tensor::empty({m, vocab}, DType::F32);
    lm_head_logits(x, table, fp32, LinearRows::Batch, CpuMatmul::Fp32);
    fill(fast, std::nanf(""));
    lm_head_logits(x, table, fast, LinearRows::Batch, CpuMatmul::Bf16Activations);
    for (int64_t i = 0; i < m * vocab; ++i) {
      double magnitude = 0;
      for (int64_t c = 0; c < hidden; ++c)
        magnitude += std::abs(static_cast<double>(x.data<float>()[(i / vocab) * hidden + c]) *
                              wide.data<float>()[(i % vocab) * hidden + c]);
      ASSERT_NEAR(fp32.data<float>()[i], reference.data<float>()[i], 1e-6 * magnitude) << m << " " << i;
      ASSERT_NEAR(fast.data<float>()[i], reference.data<float>()[i], (std::ldexp(1.0, -9) + 4e-6) * magnitude)
          << m << " " << i;
    }
  }
}

TEST(CpuMatmul, Bf16EmbeddingRowsAreTheWidenedTable) {
  Rng rng(13);
  const std::vector<uint16_t> bits = random_bf16(40 * 24, rng);
  Tensor table = Tensor::empty({40, 24}, DType::BF16);
  std::memcpy(table.raw(), bits.data(), table.nbytes());
  Tensor wide = Tensor::empty({40, 24}, DType::F32);
  convert_cpu(table, wide);
  const Tensor ids = Tensor::from_ints({3, 39, 0, 3}, Shape{2, 2});
  Tensor a = Tensor::empty({2, 2, 24}, DType::F32), b = Tensor::empty({2, 2, 24}, DType::F32);
  embedding_forward(ids, table, a);
  embedding_forward(ids, wide, b);
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  Tensor one = Tensor::empty({1, 24}, DType::F32);
  expect_error([&] { embedding_forward(Tensor::from_ints({40}, Shape{1}), table, one); }, {"token id 40", "[0, 40)"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_bf16_kernels
