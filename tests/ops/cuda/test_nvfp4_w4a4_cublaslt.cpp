// The SM 10.x NVFP4 x NVFP4 GEMM ("cuda/nvfp4-cublaslt-fp4": cuBLASLt's block-scaled FP4 matmul,
// ops/nvfp4_w4a4_linear.h) on the emulated device presenting a B200 (sm_100; a real GPU is what it is: skipped unless
// it is compute 10.x):
//  - the block-scale layout (ops/cuda/nvfp4_block_scale_layout.h, the cuBLAS documentation's formula) equals a second
//    statement of it, PyTorch's to_blocked as a reshape / permute (torch/testing/_internal/common_quantized.py:
//    view(nr, 128, nc, 4).permute(0, 2, 1, 3).reshape(-1, 4, 32, 4).transpose(1, 2)), and the worked examples of
//    NVIDIA's nvmath-python (helpers/matmul.py get_block_scale_offset: K = 128, (5, 2) -> 82, (5, 5) -> 593);
//  - the kernel that lays the scales out writes exactly that layout, padding zero;
//  - y equals the exact products' sum rounded once to fp32, times alpha, rounded to BF16 (what the emulated cuBLASLt
//    computes from the cuBLAS documentation's statement; on a GPU, whose order is cuBLASLt's, within the fp32 bound),
//    on ragged M (not a multiple of 128), k multiples of 32, y's padding never written;
//  - a k that is not a multiple of 32 is refused with what cuBLASLt needs, and other GPUs say why the path is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/emulated_arch.h"
#include "common/test_util.h"
#include "core/numeric.h"
#include "core/rng.h"
#include "ops/cuda/nvfp4_block_scale_layout.h"
#include "ops/cuda/nvfp4_w4a4_cublaslt.h"
#include "ops/cuda/nvfp4_w4a4_test_util.h"
#include "ops/nvfp4_w4a4_linear.h"
#include "ops/ops_testing.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::test::test_nvfp4_w4a4_cublaslt {
namespace {

// PyTorch's to_blocked, read as index arithmetic: the padded [Rp, Cp] scales viewed as [nr, 128, nc, 4], permuted to
// [nr, nc, 128, 4], reshaped to [nr * nc, 4, 32, 4] (128 rows = 4 groups of 32), dims 1 and 2 transposed to
// [nr * nc, 32, 4, 4], flattened.
int64_t to_blocked_offset(int64_t r, int64_t c, int64_t k_blocks) {
  const int64_t nc = (k_blocks + 3) / 4;
  const int64_t rt = r / 128, rr = r % 128, ct = c / 4, cc = c % 4;
  const int64_t tile = rt * nc + ct;                 // after permute(0, 2, 1, 3) and the reshape's first dim
  const int64_t group = rr / 32, lane = rr % 32;     // reshape(-1, 4, 32, 4): [tile, group, lane, cc]
  return ((tile * 32 + lane) * 4 + group) * 4 + cc;  // transpose(1, 2): [tile, lane, group, cc]
}

TEST(Nvfp4CublasLtLayout, IsTheOnePyTorchAndNvmathState) {
  for (const auto& [rows, k_blocks] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {5, 8}, {130, 3}, {200, 7}, {256, 8}, {384, 12}, {129, 65}}) {
    SCOPED_TRACE(fmt::format("{} rows, {} scale columns", rows, k_blocks));
    EXPECT_EQ(cuda::block_scale_layout_bytes(rows, k_blocks), (rows + 127) / 128 * 128 * ((k_blocks + 3) / 4 * 4));
    std::vector<int> hits(static_cast<size_t>(cuda::block_scale_layout_bytes(rows, k_blocks)), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < k_blocks; ++c) {
        const int64_t offset = cuda::block_scale_offset(r, c, k_blocks);
        ASSERT_EQ(offset, to_blocked_offset(r, c, k_blocks)) << r << ", " << c;
        ++hits[static_cast<size_t>(offset)];
      }
    for (int hit : hits) ASSERT_LE(hit, 1) << "two scales at one offset";
  }
  // nvmath-python's docstring (K = 128: 8 scale columns) and a worked example of the layout (R = 256, K = 128).
  EXPECT_EQ(cuda::block_scale_offset(5, 2, 8), 82);
  EXPECT_EQ(cuda::block_scale_offset(5, 5, 8), 593);
  const std::vector<std::pair<std::pair<int64_t, int64_t>, int64_t>> examples = {
      {{0, 0}, 0},      {{1, 0}, 16},     {{32, 0}, 4},   {{0, 1}, 1},    {{0, 4}, 512},
      {{128, 0}, 1024}, {{200, 7}, 1675}, {{31, 3}, 499}, {{127, 3}, 511}};
  for (const auto& [at, offset] : examples) EXPECT_EQ(cuda::block_scale_offset(at.first, at.second, 8), offset);
}

Tensor u8_tensor(const std::vector<uint8_t>& bytes, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::U8);
  std::memcpy(t.raw(), bytes.data(), bytes.size());
  return t;
}

TEST(Nvfp4CublasLtLayout, TheLayOutKernelWritesThatLayoutWithZeroPadding) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(4);
  for (const auto& [rows, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 16}, {130, 48}, {200, 112}, {256, 1024}}) {
    SCOPED_TRACE(fmt::format("{} x {}", rows, k));
    const int64_t k_blocks = k / 16, bytes = cuda::nvfp4_cublaslt_scale_bytes(rows, k);
    std::vector<uint8_t> scales(static_cast<size_t>(rows * k_blocks));
    for (uint8_t& s : scales) s = static_cast<uint8_t>(1 + rng.below(0x7E));
    const Tensor on_gpu = u8_tensor(scales, {rows, k_blocks}).to(kGpu);
    // The output starts as 0xAA everywhere: padding must come out zero.
    Tensor out = u8_tensor(std::vector<uint8_t>(static_cast<size_t>(bytes), 0xAA), {bytes}).to(kGpu);
    cuda::nvfp4_lay_out_block_scales(static_cast<const uint8_t*>(on_gpu.raw()), rows, k,
                                     static_cast<uint8_t*>(out.raw()));
    const Tensor host = out.to(Device::cpu());
    const auto* laid_out = static_cast<const uint8_t*>(host.raw());
    std::vector<uint8_t> expected(static_cast<size_t>(bytes), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < k_blocks; ++c)
        expected[static_cast<size_t>(to_blocked_offset(r, c, k_blocks))] =
            scales[static_cast<size_t>(r * k_blocks + c)];
    EXPECT_EQ(std::vector<uint8_t>(laid_out, laid_out + bytes), expected);
  }
}

// Positive scale bytes (cuBLASLt's UE4M3), every code.
Nvfp4Tensor random_operand(int64_t rows, int64_t cols, float tensor_scale, Rng& rng) {
  Nvfp4Tensor q = test::random_nvfp4_bytes(rows, cols, rng, tensor_scale);
  auto* scales = static_cast<uint8_t*>(q.block_scales.raw());
  for (int64_t i = 0; i < q.block_scales.numel(); ++i) scales[i] &= 0x7F;
  return q;
}

#define SKIP_UNLESS_CUBLASLT_FP4()                                                                   \
  NVFP4LM_SKIP_WITHOUT_GPU();                                                                        \
  const EmulatedArch b200(100);                                                                      \
  do {                                                                                               \
    std::string why_not;                                                                             \
    if (!nvfp4_w4a4_path_available(kGpu, kNvfp4W4a4CublasLtPath, &why_not)) GTEST_SKIP() << why_not; \
  } while (false)

TEST(Nvfp4W4a4CublasLt, EqualsTheExactSumRoundedOnce) {
  SKIP_UNLESS_CUBLASLT_FP4();
  EXPECT_STREQ(nvfp4_w4a4_compute_path(kGpu), kNvfp4W4a4CublasLtPath);
  struct Shape3 {
    int64_t m, n, k;
  };
  uint64_t seed = 31;
  for (const Shape3& s : {Shape3{1, 8, 32}, Shape3{5, 72, 96}, Shape3{130, 16, 160}, Shape3{64, 136, 1056}}) {
    SCOPED_TRACE(fmt::format("m={} n={} k={}", s.m, s.n, s.k));
    Rng rng(seed++);
    const Nvfp4Tensor x = random_operand(s.m, s.k, 1.7e-3f, rng), w = random_operand(s.n, s.k, 3.1e-4f, rng);
    const float alpha = x.tensor_scale * w.tensor_scale;
    const std::vector<uint16_t> got = gpu_forward(x, w, /*padding=*/8);  // y's row stride a multiple of 8
    int64_t mismatches = 0;
    for (int64_t m = 0; m < s.m; ++m)
      for (int64_t n = 0; n < s.n; ++n) {
        double sum = 0, magnitude = 0;
        for (int64_t k = 0; k < s.k; ++k) {
          sum += element(x, m, k) * element(w, n, k);
          magnitude += std::fabs(element(x, m, k) * element(w, n, k));
        }
        const uint16_t want = float_to_bf16(alpha * static_cast<float>(sum));
        const size_t i = static_cast<size_t>(m * s.n + n);
        if (kEmulated) {
          if (got[i] != want && ++mismatches <= 5)
            ADD_FAILURE() << "y[" << m << "][" << n << "] = " << bf16_to_float(got[i]) << ", expected "
                          << bf16_to_float(want);
        } else {
          // Any order of fp32 sums of k terms: k 2^-24 Σ|terms|, plus the final BF16 rounding.
          const double bound =
              static_cast<double>(s.k) * 0x1p-24 * magnitude * alpha + 0x1p-8 * std::fabs(bf16_to_float(want));
          EXPECT_LE(std::fabs(bf16_to_float(got[i]) - bf16_to_float(want)), bound) << m << ", " << n;
        }
      }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(Nvfp4W4a4CublasLt, RefusesAKThatIsNotAMultipleOf32) {
  SKIP_UNLESS_CUBLASLT_FP4();
  Rng rng(2);
  const Nvfp4Tensor x = random_operand(4, 48, 1.f, rng), w = random_operand(8, 48, 1.f, rng);
  Tensor y = Tensor::empty({4, 8}, DType::BF16, kGpu);
  test::expect_error([&] { nvfp4_w4a4_linear_forward(on_gpu(x), on_gpu(w), y); },
                     {"cuda/nvfp4-cublaslt-fp4", "multiple of 32"});
}

TEST(Nvfp4W4a4CublasLt, OtherGpusSayWhyItIsAbsent) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  if (!kEmulated) GTEST_SKIP() << "the emulated device presents each arch here; a GPU is what it is";
  for (int arch : {90, 121}) {
    const EmulatedArch other(arch);
    std::string why_not;
    EXPECT_FALSE(nvfp4_w4a4_path_available(kGpu, kNvfp4W4a4CublasLtPath, &why_not)) << arch;
    EXPECT_NE(why_not.find("compute capability 10.x"), std::string::npos) << why_not;
  }
  const EmulatedArch gb10(121);
  EXPECT_STREQ(nvfp4_w4a4_compute_path(kGpu), kNvfp4W4a4CudaPath) << "SM 12.x keeps its own FP4 mma";
}

}  // namespace
}  // namespace nvfp4lm::test::test_nvfp4_w4a4_cublaslt
