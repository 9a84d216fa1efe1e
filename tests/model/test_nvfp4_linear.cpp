// ops/nvfp4_linear.h on the CPU: y = x · deq(w)ᵀ against a direct double-precision formula over the dequantized
// weight, for row counts on both sides of the fused (decode) / dequantize + sgemm (batched) switch, odd shapes,
// a scratch smaller than the weight (row blocks), row-strided views, and U8-typed codes as files give them.
#include <gtest/gtest.h>

#include "model_test_util.h"
#include "ops/nvfp4_linear.h"

namespace nvfp4lm::test::test_nvfp4_linear {
namespace {

// x · deq(w)ᵀ in double.
Tensor reference(const Tensor& x, const Nvfp4Tensor& w) {
  const Tensor dense = dequantize_nvfp4(w, DType::F32);
  const int64_t n = x.dim(0), in = x.dim(1), out = w.rows;
  Tensor y = Tensor::empty({n, out}, DType::F32);
  const std::vector<float> xs = to_float_vector(x);
  const float* wd = dense.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < in; ++k) acc += static_cast<double>(xs[static_cast<size_t>(i * in + k)]) * wd[o * in + k];
      y.data<float>()[i * out + o] = static_cast<float>(acc);
    }
  }
  return y;
}

TEST(Nvfp4Linear, MatchesDequantizedProductForEveryRowCount) {
  Rng rng(3);
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{48, 64}, {37, 160}, {200, 32}}) {
    const Nvfp4Tensor w = quantize_nvfp4(random_normal({out, in}, rng, 0.05f));
    for (int64_t n : {int64_t{1}, int64_t{3}, kNvfp4FusedMaxRows, kNvfp4FusedMaxRows + 1, int64_t{41}}) {
      const Tensor x = random_normal({n, in}, rng);
      Tensor y = Tensor::empty({n, out}, DType::F32);
      Tensor scratch = Tensor::empty({nvfp4_linear_scratch_elements(w)}, DType::F32);
      nvfp4_linear_forward(x, w, y, scratch);
      expect_rel_close(y, reference(x, w), 1e-5, fmt::format("[{}, {}] x {} rows", out, in, n));
    }
  }
}

TEST(Nvfp4Linear, SmallScratchRowBlocksAndStridedViews) {
  Rng rng(5);
  const int64_t out = 70, in = 48, n = 20;
  const Nvfp4Tensor w = quantize_nvfp4(random_normal({out, in}, rng, 0.1f));
  const Tensor wide_x = random_normal({n, in + 16}, rng);
  const Tensor x = wide_x.narrow(1, 8, in);  // row-strided input
  Tensor wide_y = Tensor::zeros({n, out + 5}, DType::F32);
  Tensor y = wide_y.narrow(1, 5, out);                        // row-strided output
  Tensor scratch = Tensor::empty({in * 16 + 3}, DType::F32);  // 16 weight rows per block, 5 blocks
  nvfp4_linear_forward(x, w, y, scratch);
  expect_rel_close(y.contiguous(), reference(x.contiguous(), w), 1e-5, "row blocks");
  EXPECT_EQ(to_float_vector(wide_y.narrow(1, 0, 5).contiguous()), std::vector<float>(5 * n, 0.f));
  // Codes typed U8 (as read from files) give the same result.
  Nvfp4Tensor as_u8 = w;
  as_u8.codes = w.codes.view_as(DType::U8);
  Tensor y2 = Tensor::empty({n, out}, DType::F32);
  nvfp4_linear_forward(x, as_u8, y2, scratch);
  EXPECT_EQ(to_float_vector(y2), to_float_vector(y.contiguous()));
}

TEST(Nvfp4Linear, TensorScaleIsApplied) {
  Rng rng(9);
  Nvfp4Tensor w = quantize_nvfp4(random_normal({16, 32}, rng));
  const Tensor x = random_normal({2, 32}, rng);
  Tensor scratch = Tensor::empty({nvfp4_linear_scratch_elements(w)}, DType::F32);
  Tensor y = Tensor::empty({2, 16}, DType::F32);
  nvfp4_linear_forward(x, w, y, scratch);
  w.tensor_scale *= 2.0f;
  Tensor y2 = Tensor::empty({2, 16}, DType::F32);
  nvfp4_linear_forward(x, w, y2, scratch);
  const std::vector<float> a = to_float_vector(y), b = to_float_vector(y2);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(b[i], 2.0f * a[i]);
  EXPECT_STREQ(nvfp4_linear_compute_path(Device::cpu()), "cpu/dequant-gemm");
#if !NVFP4LM_HAS_CUDA
  EXPECT_THROW(nvfp4_linear_compute_path(Device::cuda()), Error);
#endif
}

}  // namespace
}  // namespace nvfp4lm::test::test_nvfp4_linear
