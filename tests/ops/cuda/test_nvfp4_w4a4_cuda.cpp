// The SM 12.x NVFP4 x NVFP4 GEMM ("cuda/nvfp4-mma-fp4", ops/nvfp4_w4a4_linear.h) against the CPU. On the emulated
// device presenting a GB10 (sm_121), whose mma sums each 64 products exactly and rounds once, it must equal bit for
// bit a CPU statement of the same summation order (one fp32 rounding per 64 values of k, in increasing k; alpha
// applied to the fp32 sum, rounded to BF16); on a GPU, whose in-mma order is unspecified, it must lie within the
// derived bound below. Against the reference `--qat w4a4` computes (both operands fake-quantized to BF16 values, an
// fp32 GEMM) it must lie within the bound ops/nvfp4_w4a4_linear.h states. Shapes with ragged m / n / k edges (k not
// a multiple of 64, rows past a 64-row tile), all-zero blocks, the largest scale (0x7E = 448) and subnormal scales
// (0x01..0x07); a row computed alone gets the bits it gets in a batch; y's padding is never written. An sm_90 device
// says why the path is not there. Skipped on a GPU that is not SM 12.x.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/emulated_arch.h"
#include "common/test_util.h"
#include "core/numeric.h"
#include "core/rng.h"
#include "ops/cuda/nvfp4_w4a4_test_util.h"
#include "ops/gemm.h"
#include "ops/nvfp4_w4a4_linear.h"
#include "ops/ops_testing.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::test::test_nvfp4_w4a4_cuda {
namespace {

#define SKIP_UNLESS_NATIVE_W4A4()                                                          \
  NVFP4LM_SKIP_WITHOUT_GPU();                                                              \
  const EmulatedArch gb10(121);                                                            \
  do {                                                                                     \
    std::string why_not;                                                                   \
    if (!nvfp4_w4a4_native(kGpu, &why_not)) GTEST_SKIP() << "no native W4A4: " << why_not; \
  } while (false)

// Random codes (all 16) and scale bytes: mostly ordinary (0x30..0x5F), some from the whole finite range, some
// special blocks: all-zero codes, the largest scale 0x7E, subnormal scales 0x01..0x07, scale 0.
Nvfp4Tensor random_nvfp4(int64_t rows, int64_t cols, float tensor_scale, Rng& rng) {
  Nvfp4Tensor q = test::empty_nvfp4(rows, cols, tensor_scale);
  auto* codes = static_cast<uint8_t*>(q.codes.raw());
  auto* scales = static_cast<uint8_t*>(q.block_scales.raw());
  for (int64_t i = 0; i < q.codes.numel(); ++i) codes[i] = static_cast<uint8_t>(rng.below(256));
  for (int64_t i = 0; i < q.block_scales.numel(); ++i) {
    switch (rng.below(12)) {
      case 0:
        scales[i] = static_cast<uint8_t>(rng.below(0x7F));
        break;
      case 1:
        scales[i] = 0x7E;
        break;
      case 2:
        scales[i] = static_cast<uint8_t>(1 + rng.below(7));
        break;
      case 3:
        scales[i] = 0;
        break;
      case 4:  // an all-zero block under an ordinary scale
        scales[i] = 0x38;
        for (int b = 0; b < 8; ++b) codes[i * 8 + b] = 0;
        break;
      default:
        scales[i] = static_cast<uint8_t>(0x30 + rng.below(0x30));
    }
  }
  return q;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).contiguous();
  const auto* data = static_cast<const uint8_t*>(host.raw());
  return std::vector<uint8_t>(data, data + host.nbytes());
}

// The kernel's summation order on the emulated device, stated on the CPU.
std::vector<uint16_t> same_order_reference(const Nvfp4Tensor& x, const Nvfp4Tensor& w) {
  const float alpha = x.tensor_scale * w.tensor_scale;
  std::vector<uint16_t> y(static_cast<size_t>(x.rows * w.rows));
  for (int64_t m = 0; m < x.rows; ++m)
    for (int64_t n = 0; n < w.rows; ++n) {
      float acc = 0.f;
      for (int64_t k0 = 0; k0 < x.cols; k0 += 64) {
        double sum = acc;
        for (int64_t k = k0; k < std::min(k0 + 64, x.cols); ++k) sum += element(x, m, k) * element(w, n, k);
        acc = static_cast<float>(sum);
      }
      y[static_cast<size_t>(m * w.rows + n)] = float_to_bf16(acc * alpha);
    }
  return y;
}

// Σ_k |x_k w_k| (exact products, tensor scales applied), the scale of the bounds.
double magnitude(const Nvfp4Tensor& x, const Nvfp4Tensor& w, int64_t m, int64_t n) {
  double sum = 0;
  for (int64_t k = 0; k < x.cols; ++k) sum += std::fabs(element(x, m, k) * element(w, n, k));
  return sum * static_cast<double>(x.tensor_scale) * static_cast<double>(w.tensor_scale);
}

struct Shape3 {
  int64_t m, n, k;
};
// Ragged everything: k not a multiple of 64 (16, 80, 208), rows and weight rows past whole 64 tiles, one row.
const Shape3 kShapes[] = {{1, 1, 16}, {1, 70, 208}, {37, 9, 80}, {64, 64, 64}, {70, 130, 144}, {129, 8, 1040}};

TEST(Nvfp4W4a4Cuda, EqualsTheCpuStatementOfItsSummationOrder) {
  SKIP_UNLESS_NATIVE_W4A4();
  uint64_t seed = 11;
  for (const Shape3& s : kShapes) {
    SCOPED_TRACE(fmt::format("m={} n={} k={}", s.m, s.n, s.k));
    Rng rng(seed++);
    const Nvfp4Tensor x = random_nvfp4(s.m, s.k, 1.7e-3f, rng), w = random_nvfp4(s.n, s.k, 3.1e-4f, rng);
    const std::vector<uint16_t> got = gpu_forward(x, w), want = same_order_reference(x, w);
    int64_t mismatches = 0;
    for (int64_t m = 0; m < s.m; ++m)
      for (int64_t n = 0; n < s.n; ++n) {
        const size_t i = static_cast<size_t>(m * s.n + n);
        if (kEmulated) {
          if (got[i] != want[i] && ++mismatches <= 5)
            ADD_FAILURE() << "y[" << m << "][" << n << "] = " << bf16_to_float(got[i]) << ", the CPU statement "
                          << bf16_to_float(want[i]);
        } else {
          // Any order of fp32 sums of k terms: |error| <= k 2^-24 Σ|terms| (+ the final BF16 rounding, 1 ulp).
          const double bound =
              static_cast<double>(s.k) * 0x1p-24 * magnitude(x, w, m, n) + 0x1p-8 * std::fabs(bf16_to_float(want[i]));
          EXPECT_LE(std::fabs(bf16_to_float(got[i]) - bf16_to_float(want[i])), bound) << m << ", " << n;
        }
      }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(Nvfp4W4a4Cuda, FollowsTheFakeQuantizedGemmOfQatW4a4WithinTheStatedBound) {
  SKIP_UNLESS_NATIVE_W4A4();
  Rng rng(5);
  const int64_t m = 45, n = 72, k = 336;
  // Activations and weights as training has them: the CPU and the GPU quantizers give the same bytes (quant/nvfp4.h).
  const Tensor x_values = test::random_normal({m, k}, rng), w_values = test::random_normal({n, k}, rng);
  const Nvfp4Tensor x = quantize_nvfp4(x_values, {}, "x"), w = quantize_nvfp4(w_values, {}, "w");
  const Nvfp4Tensor x_on_gpu = quantize_nvfp4(x_values.to(kGpu), {}, "x");
  EXPECT_EQ(x_on_gpu.tensor_scale, x.tensor_scale);
  EXPECT_EQ(bytes_of(x_on_gpu.codes), bytes_of(x.codes));
  EXPECT_EQ(bytes_of(x_on_gpu.block_scales), bytes_of(x.block_scales));

  // The reference: both fake-quantized to BF16 values (what block_forward multiplies under --qat w4a4), fp32 GEMM.
  Tensor x_fake = Tensor::empty({m, k}, DType::BF16, kGpu), w_fake = Tensor::empty({n, k}, DType::BF16, kGpu);
  fake_quantize_nvfp4(x_values.to(kGpu), x_fake, {}, "x");  // BF16 out, as training's activations
  fake_quantize_nvfp4(w_values.to(kGpu), w_fake, {}, "w");
  Tensor x_ref = Tensor::empty({m, k}, DType::F32), w_ref = Tensor::empty({n, k}, DType::F32);
  convert_cpu(x_fake.to(Device::cpu()), x_ref);
  convert_cpu(w_fake.to(Device::cpu()), w_ref);
  Tensor y_ref = Tensor::empty({m, n}, DType::F32);
  gemm(x_ref, false, w_ref, true, y_ref);

  const std::vector<uint16_t> got = gpu_forward(x, w);
  const std::vector<float> want = to_float_vector(y_ref);
  constexpr double u = 0x1p-8;  // BF16's unit roundoff (8 significant bits)
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t at = static_cast<size_t>(i * n + j);
      // Operand rounding to BF16 (2u + u²) Σ|x w|, two fp32 sums of k terms (2 k 2^-24 Σ|x w|), y's BF16 rounding.
      const double scale = magnitude(x, w, i, j);
      const double bound = (2 * u + u * u + 2.0 * static_cast<double>(k) * 0x1p-24) * scale +
                           u * (std::fabs(want[at]) + (2 * u + u * u) * scale) + 1e-30;
      const double error = std::fabs(static_cast<double>(bf16_to_float(got[at])) - want[at]);
      EXPECT_LE(error, bound) << "y[" << i << "][" << j << "]";
      worst = std::max(worst, error / bound);
    }
  fmt::print("[w4a4 vs fake-quant] worst error {:.2f} of the bound\n", worst);

  // The CPU twin of the op is the same dequantize-and-multiply: its F32 y is the exact products' sum to fp32.
  Tensor y_cpu = Tensor::empty({m, n}, DType::F32);
  nvfp4_w4a4_linear_forward(x, w, y_cpu);
  const std::vector<float> cpu = to_float_vector(y_cpu);
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_LE(std::fabs(static_cast<double>(bf16_to_float(got[i])) - cpu[i]),
              u * std::fabs(cpu[i]) + 2.0 * static_cast<double>(k) * 0x1p-24 * magnitude(x, w, i / n, i % n) + 1e-30);
}

TEST(Nvfp4W4a4Cuda, ARowGetsTheSameBitsAloneAsInABatch) {
  SKIP_UNLESS_NATIVE_W4A4();
  Rng rng(21);
  const int64_t m = 70, n = 40, k = 176;
  const Nvfp4Tensor x = random_nvfp4(m, k, 0.02f, rng), w = random_nvfp4(n, k, 0.5f, rng);
  const std::vector<uint16_t> batch = gpu_forward(x, w);
  for (int64_t row : {int64_t{0}, int64_t{17}, int64_t{69}}) {
    Nvfp4Tensor alone = x;
    alone.rows = 1;
    alone.codes = x.codes.narrow(0, row, 1).contiguous();
    alone.block_scales = x.block_scales.narrow(0, row, 1).contiguous();
    const std::vector<uint16_t> single = gpu_forward(alone, w);
    for (int64_t j = 0; j < n; ++j) EXPECT_EQ(single[static_cast<size_t>(j)], batch[static_cast<size_t>(row * n + j)]);
  }
}

TEST(Nvfp4W4a4Cuda, AnotherGpuSaysWhyItHasNoNativeW4a4) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  if (!kEmulated) GTEST_SKIP() << "the emulated device presents an sm_90 here; a GPU is what it is";
  const EmulatedArch hopper(90);
  std::string why_not;
  EXPECT_FALSE(nvfp4_w4a4_native(kGpu, &why_not));
  EXPECT_NE(why_not.find("not Blackwell SM 12.x"), std::string::npos) << why_not;
  EXPECT_NE(why_not.find("compute capability 10.x"), std::string::npos) << why_not;
  Rng rng(3);
  const Nvfp4Tensor x = random_nvfp4(4, 32, 1.f, rng), w = random_nvfp4(8, 32, 1.f, rng);
  Tensor y = Tensor::empty({4, 8}, DType::BF16, kGpu);
  try {
    nvfp4_w4a4_linear_forward(on_gpu(x), on_gpu(w), y);
    ADD_FAILURE() << "ran on an sm_90";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda/nvfp4-mma-fp4) is not available on cuda:0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_nvfp4_w4a4_cuda
