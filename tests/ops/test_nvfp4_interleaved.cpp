// ops/cpu/nvfp4_interleaved.h: the layout round-trips the row layout's bytes (partial last groups included); the
// block-order quantizer holds quantize_int8_block's values; every variant this CPU has (scalar always) computes
// nvfp4_int8_dot.h's formula — against the row kernel's own scalar variant, to fp32 summation order — for 1..8
// rows, row counts that are not multiples of 16, sub-ranges of groups, negative and subnormal scales and
// non-finite activations; and the NVFP4 linear on an interleaved weight gives the row layout's results on both the
// decode (int8) and the prefill (BF16) path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ops/cpu/nvfp4_int8_dot.h"
#include "ops/cpu/nvfp4_interleaved.h"
#include "ops/cpu/nvfp4_linear.h"
#include "ops/nvfp4_linear.h"
#include "ops_testing.h"
#include "quant/e4m3.h"

namespace nvfp4lm::test::test_nvfp4_interleaved {
namespace {

using Variant = cpu::InterleavedDotFamily::Variant;

const uint8_t* codes_of(const Nvfp4Tensor& w) { return static_cast<const uint8_t*>(w.codes.raw()); }
const uint8_t* scales_of(const Nvfp4Tensor& w) { return static_cast<const uint8_t*>(w.block_scales.raw()); }

std::vector<uint8_t> interleaved(const Nvfp4Tensor& w) {
  std::vector<uint8_t> out(static_cast<size_t>(cpu::interleaved_nvfp4_bytes(w.rows, w.cols)), 0xAB);
  cpu::interleave_nvfp4(codes_of(w), scales_of(w), w.rows, w.cols, out.data());
  return out;
}

TEST(Nvfp4Interleaved, LayoutRoundTripsTheRowLayout) {
  Rng rng(1);
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{16, 16}, {37, 48}, {5, 2560}, {64, 400}}) {
    const Nvfp4Tensor w = random_nvfp4_bytes(rows, cols, rng, 1.0f);
    const std::vector<uint8_t> data = interleaved(w);
    ASSERT_EQ(data.size(), static_cast<size_t>((rows + 15) / 16 * (cols / 16) * 144));
    // Element k of row o: byte k/2 of the row sits in block k/16, half (k%16)/8, at 4·(o%16) + (k%8)/2.
    for (int64_t o = 0; o < rows; ++o)
      for (int64_t byte = 0; byte < cols / 2; ++byte) {
        const int64_t block = byte / 8, half = byte % 8 / 4;
        const size_t at =
            static_cast<size_t>(((o / 16) * (cols / 16) + block) * 144 + half * 64 + 4 * (o % 16) + byte % 4);
        ASSERT_EQ(data[at], codes_of(w)[o * cols / 2 + byte]) << "row " << o << " byte " << byte;
      }
    std::vector<uint8_t> codes(static_cast<size_t>(16 * cols / 2)), scales(static_cast<size_t>(16 * cols / 16));
    for (int64_t g = 0; g < (rows + 15) / 16; ++g) {
      const int64_t count = std::min<int64_t>(16, rows - 16 * g);
      cpu::deinterleave_nvfp4_group(data.data(), cols, g, count, codes.data(), scales.data());
      EXPECT_EQ(0, std::memcmp(codes.data(), codes_of(w) + 16 * g * cols / 2, static_cast<size_t>(count * cols / 2)));
      EXPECT_EQ(0,
                std::memcmp(scales.data(), scales_of(w) + 16 * g * cols / 16, static_cast<size_t>(count * cols / 16)));
      // Padding rows of the last group are zero codes and zero scales.
      for (int64_t row = count; row < 16; ++row)
        for (int64_t b = 0; b < cols / 16; ++b) {
          const uint8_t* block = data.data() + (g * (cols / 16) + b) * 144;
          for (int k = 0; k < 4; ++k) EXPECT_EQ(block[4 * row + k] | block[64 + 4 * row + k], 0);
          EXPECT_EQ(block[128 + row], 0);
        }
    }
  }
}

TEST(Nvfp4Interleaved, QuantizerHoldsTheBlockValuesInCodeOrder) {
  Rng rng(2);
  Tensor x = random_normal({2560}, rng);
  x.data<float>()[40] = NAN;  // block 2
  cpu::Int8BlockActivations a;
  cpu::quantize_int8_blocks(x.data<float>(), 2560, a);
  ASSERT_EQ(a.q.size(), 2560u);
  for (int64_t b = 0; b < 160; ++b) {
    int8_t q[16];
    const float scale = cpu::quantize_int8_block(x.data<float>() + b * 16, q);
    if (std::isnan(scale))
      EXPECT_TRUE(std::isnan(a.scale[static_cast<size_t>(b)]));
    else
      EXPECT_EQ(a.scale[static_cast<size_t>(b)], scale);
    const int order[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
    int sum = 0;
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(a.q[static_cast<size_t>(b * 16 + i)], q[order[i]]) << "block " << b << " position " << i;
      sum += q[i];
    }
    EXPECT_EQ(a.bias[static_cast<size_t>(b)], -12 * sum);
  }
}

// The same weight and activations through the row kernel's scalar variant (the reference, tested against the exact
// formula in test_nvfp4_int8_dot.cpp) and through each interleaved variant.
struct BothRuns {
  std::vector<float> row_kernel, interleaved;
  std::vector<double> magnitude;  // Σ |terms| per output, the scale of fp32 rounding
};

BothRuns run_both(const Variant& variant, const Nvfp4Tensor& w, const Tensor& x, int64_t first_group,
                  int64_t last_group) {
  const int64_t n = x.dim(0), out = w.rows, in = w.cols;
  std::vector<cpu::Int8Activations> row_q(static_cast<size_t>(n));
  std::vector<cpu::Int8BlockActivations> block_q(static_cast<size_t>(n));
  BothRuns run;
  run.row_kernel.assign(static_cast<size_t>(n * out), -7.0f);
  run.interleaved.assign(static_cast<size_t>(n * out), -7.0f);
  std::vector<const cpu::Int8Activations*> row_x;
  std::vector<const cpu::Int8BlockActivations*> block_x;
  std::vector<float*> row_y, block_y;
  for (int64_t r = 0; r < n; ++r) {
    cpu::quantize_int8_activations(x.data<float>() + r * in, in, row_q[static_cast<size_t>(r)]);
    cpu::quantize_int8_blocks(x.data<float>() + r * in, in, block_q[static_cast<size_t>(r)]);
    row_x.push_back(&row_q[static_cast<size_t>(r)]);
    block_x.push_back(&block_q[static_cast<size_t>(r)]);
    row_y.push_back(run.row_kernel.data() + r * out);
    block_y.push_back(run.interleaved.data() + r * out);
  }
  const cpu::Nvfp4Rows rows{codes_of(w), scales_of(w), in, w.tensor_scale};
  cpu::nvfp4_int8_dot_rows(cpu::nvfp4_int8_dot_family().variant(cpu::kScalarIsa), rows, std::min(out, first_group * 16),
                           std::min(out, last_group * 16), row_x.data(), row_y.data(), static_cast<int>(n));
  const std::vector<uint8_t> data = interleaved(w);
  cpu::nvfp4_interleaved_int8_dot(variant, cpu::Nvfp4Interleaved{data.data(), out, in, w.tensor_scale}, first_group,
                                  last_group, block_x.data(), block_y.data(), static_cast<int>(n));
  // A bound on Σ |terms| (|2·e2m1| <= 12, |q| <= 127): the scale of the fp32 rounding.
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0;
      for (int64_t b = 0; b < in / 16; ++b)
        sum += 16 * 12 * 127 * std::abs(e4m3_to_float(scales_of(w)[o * in / 16 + b])) / 256.0 *
               std::abs(block_q[static_cast<size_t>(r)].scale[static_cast<size_t>(b)]);
      run.magnitude.push_back(sum * std::abs(w.tensor_scale));
    }
  return run;
}

TEST(Nvfp4Interleaved, EveryVariantComputesTheRowKernelsFormula) {
  const std::vector<const Variant*> variants = cpu::nvfp4_interleaved_family().runnable();
  ASSERT_TRUE(variants.back()->isa->portable());
  for (const cpu::CpuIsa* isa : cpu::nvfp4_interleaved_family().isas()) EXPECT_NE(isa, &cpu::kAvx2Isa);
  uint64_t seed = 5;
  for (const auto& [out, in] :
       {std::pair<int64_t, int64_t>{7, 16}, {16, 48}, {37, 400}, {64, 2560}, {33, 272}, {150, 64}}) {
    for (int64_t n : {1, 2, 3, 8}) {
      Rng rng(++seed);
      const Nvfp4Tensor w = random_nvfp4_bytes(out, in, rng, n % 2 ? 1.0f : 3.1e-4f);
      Tensor x = random_normal({n, in}, rng);
      for (int64_t i = 0; i < n * in; i += 37) x.data<float>()[i] *= 40.0f;
      const int64_t groups = (out + 15) / 16;
      std::vector<float> first_result;
      for (const Variant* variant : variants) {
        const BothRuns run = run_both(*variant, w, x, 0, groups);
        for (size_t i = 0; i < run.row_kernel.size(); ++i)
          ASSERT_NEAR(run.interleaved[i], run.row_kernel[i], 2e-6 * run.magnitude[i] + 1e-30)
              << variant->name() << " [" << out << ", " << in << "] n=" << n << " output " << i;
        // The variants sum in the same order: bit for bit the same.
        if (first_result.empty())
          first_result = run.interleaved;
        else
          EXPECT_EQ(run.interleaved, first_result) << variant->name();
      }
    }
  }
}

TEST(Nvfp4Interleaved, WritesOnlyTheRequestedGroupsAndPropagatesNonFiniteValues) {
  Rng rng(9);
  const Nvfp4Tensor w = random_nvfp4_bytes(50, 256, rng, 0.5f);
  Tensor x = random_normal({2, 256}, rng);
  for (const Variant* variant : cpu::nvfp4_interleaved_family().runnable()) {
    const BothRuns full = run_both(*variant, w, x, 0, 4), part = run_both(*variant, w, x, 1, 3);
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t o = 0; o < 50; ++o) {
        const size_t i = static_cast<size_t>(r * 50 + o);
        if (o >= 16 && o < 48)
          EXPECT_EQ(part.interleaved[i], full.interleaved[i]);
        else
          EXPECT_EQ(part.interleaved[i], -7.0f) << "row " << o;
      }
    Tensor bad = x.clone();
    bad.data<float>()[130] = INFINITY;
    Nvfp4Tensor positive = w;
    positive.block_scales = w.block_scales.clone();
    auto* scales = static_cast<uint8_t*>(positive.block_scales.raw());
    for (int64_t i = 0; i < positive.block_scales.numel(); ++i) scales[i] = 0x38;  // no zero scale hides the NaN
    const BothRuns run = run_both(*variant, positive, bad, 0, 4);
    for (int64_t o = 0; o < 50; ++o) EXPECT_FALSE(std::isfinite(run.interleaved[static_cast<size_t>(o)]));
    for (int64_t o = 0; o < 50; ++o) EXPECT_TRUE(std::isfinite(run.interleaved[static_cast<size_t>(50 + o)]));
  }
}

// Through ops/nvfp4_linear.h: an interleaved weight gives the row layout's results on the decode path (the same
// integer formula) and, bit for bit, on the prefill's BF16 path (the same values and sums).
TEST(Nvfp4Interleaved, LinearOnTheInterleavedWeightMatchesTheRowLayout) {
  Rng rng(21);
  const Nvfp4Tensor w = quantize_nvfp4(random_normal({72, 320}, rng));
  const Nvfp4Tensor moved = cpu::interleave_nvfp4_tensor(w);
  EXPECT_EQ(moved.layout, Nvfp4Layout::Interleaved16);
  EXPECT_EQ(moved.nbytes(), w.nbytes() + 8 * 320 / 2 + 8 * 320 / 16);  // the last group's 8 padding rows
  Tensor scratch = Tensor::zeros({320}, DType::F32);
  for (int64_t n : {1, 5, 40}) {
    const Tensor x = random_normal({n, 320}, rng);
    Tensor y_rows = Tensor::zeros({n, 72}, DType::F32), y_moved = Tensor::zeros({n, 72}, DType::F32);
    nvfp4_linear_forward(x, w, y_rows, scratch, LinearRows::Batch, CpuMatmul::Int8Activations);
    nvfp4_linear_forward(x, moved, y_moved, scratch, LinearRows::Batch, CpuMatmul::Int8Activations);
    for (int64_t i = 0; i < n * 72; ++i) {
      if (n > kNvfp4FusedMaxRows)
        ASSERT_EQ(y_moved.data<float>()[i], y_rows.data<float>()[i]) << "n=" << n << " output " << i;
      else
        ASSERT_NEAR(y_moved.data<float>()[i], y_rows.data<float>()[i], 1e-5f * (1 + std::abs(y_rows.data<float>()[i])))
            << "n=" << n << " output " << i;
    }
  }
  // Only the int8 / BF16 paths read it; everything else refuses it with an error naming the layout.
  Tensor y = Tensor::zeros({1, 72}, DType::F32);
  EXPECT_THROW(nvfp4_linear_forward(random_normal({1, 320}, rng), moved, y, scratch), Error);
  EXPECT_THROW(dequantize_nvfp4(moved, DType::F32), Error);
}

}  // namespace
}  // namespace nvfp4lm::test::test_nvfp4_interleaved
