// tensor_amax (quant/tensor_amax.h) on the GPU vs the CPU reference: the same value, exactly (a maximum), for
// F32 and BF16 masters of odd sizes and shapes (shorter than a warp, not a multiple of 8 or 16: the kernel's tail),
// for views whose pointers are not 16-byte aligned (its scalar path), and the CPU's error for the first non-finite
// element, in the vectorized body or in the tail. Skipped without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "common/test_util.h"
#include "core/rng.h"
#include "quant/tensor_amax.h"

namespace nvfp4lm::test_tensor_amax_cuda {
namespace {

const Device kGpu = Device::cuda(0);

// Odd sizes (shorter than a warp, a 256-thread block; one past them), 2-D and 3-D shapes.
const Shape kShapes[] = {Shape{1},      Shape{15},     Shape{17},    Shape{1000},      Shape{4099},
                         Shape{33, 65}, Shape{7, 300}, Shape{70001}, Shape{513, 1027}, Shape{3, 5, 11}};

Tensor master_of(const Tensor& values, DType dtype) {
  Tensor master = Tensor::empty(values.shape(), dtype);
  convert_cpu(values, master);
  return master;
}

std::string error_text(const Tensor& master) {
  try {
    tensor_amax(master, "layers.3.mlp.up_proj.weight");
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

TEST(TensorAmaxCuda, IsExactForF32AndBf16) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(12);
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const Shape& shape : kShapes) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dtype), shape.str()));
      Tensor values = test::random_normal(shape, rng, 0.05f);
      float* v = values.data<float>();
      // The largest magnitude at the last element, negative, in a quarter of the cases.
      if (rng.below(4) == 0) v[values.numel() - 1] = -1.5f;
      const Tensor master = master_of(values, dtype);
      const float expected = tensor_amax(master, "w");
      EXPECT_GT(expected, 0.0f);
      EXPECT_EQ(tensor_amax(master.to(kGpu), "w"), expected);
    }
    const Tensor zeros = Tensor::zeros({3, 5}, dtype, kGpu);
    EXPECT_EQ(tensor_amax(zeros, "zeros"), 0.0f);
  }
}

TEST(TensorAmaxCuda, UnalignedViewsAreExact) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(14);
  for (DType dtype : {DType::F32, DType::BF16}) {
    Tensor values = test::random_normal({41, 37}, rng, 0.05f);
    values.data<float>()[40 * 37 + 36] = 2.5f;  // the amax, in the last row of every view below
    const Tensor gpu = master_of(values, dtype).to(kGpu);
    for (int64_t first : {1, 2, 3}) {  // row starts 37, 74 or 111 elements in: not 16-byte aligned
      SCOPED_TRACE(fmt::format("{} rows {}..40", dtype_name(dtype), first));
      const Tensor view = gpu.narrow(0, first, 41 - first);
      const float expected = tensor_amax(view.to(Device::cpu()), "w");
      EXPECT_EQ(expected, 2.5f);
      EXPECT_EQ(tensor_amax(view, "w"), expected);
    }
  }
}

TEST(TensorAmaxCuda, NonFiniteIsTheCpuError) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  struct Case {
    int64_t row, col;  // the first non-finite element of a [33, 65] master
    float value;
    const char* where;
  };
  // A NaN in the vectorized body with an -inf after it; an inf as the last of 2145 elements, past every 8-chunk.
  const Case cases[] = {{20, 7, kNan, "row 20, column 7"}, {32, 64, kInf, "row 32, column 64"}};
  Rng rng(13);
  for (const Case& c : cases) {
    for (DType dtype : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dtype), c.where));
      Tensor values = test::random_normal({33, 65}, rng);
      values.data<float>()[c.row * 65 + c.col] = c.value;
      if (c.row < 30) values.data<float>()[30 * 65 + 1] = -kInf;
      const Tensor master = master_of(values, dtype);
      const std::string cpu_message = error_text(master);
      ASSERT_FALSE(cpu_message.empty()) << "the CPU scan accepted a non-finite value";
      const std::string gpu_message = error_text(master.to(kGpu));
      EXPECT_EQ(gpu_message, cpu_message);
      EXPECT_NE(gpu_message.find(c.where), std::string::npos) << gpu_message;
    }
  }
}

}  // namespace
}  // namespace nvfp4lm::test_tensor_amax_cuda
