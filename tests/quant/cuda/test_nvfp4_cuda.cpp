// NVFP4 CUDA twin vs the CPU reference: bit-identical tensor scale, codes and scales (nearest-even and
// stochastic, 1x16 and 16x16, F32 and BF16 input) on random shapes including odd row counts, identical
// dequantized and fake-quantized values, the same non-finite errors, and views whose pointers are not 16-byte
// aligned (scalar paths). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/rng.h"
#include "quant/nvfp4.h"
#include "quant/nvfp4_test_util.h"

namespace nvfp4lm::test_nvfp4_cuda {
namespace {

using test::bytes_of;

Tensor on_gpu(const Tensor& t) { return t.to(Device::cuda(0)); }

Nvfp4Tensor on_gpu(const Nvfp4Tensor& q) {
  Nvfp4Tensor g = q;
  g.codes = on_gpu(q.codes);
  g.block_scales = on_gpu(q.block_scales);
  return g;
}

// Random matrix with rows of different magnitudes, some all-zero blocks and some tiny blocks (scale floor).
Tensor awkward_matrix(int64_t rows, int64_t cols, Rng& rng, DType dtype) {
  Tensor x = test::random_normal({rows, cols}, rng);
  float* p = x.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::ldexp(1.0f, static_cast<int>(rng.below(17)) - 12);
    for (int64_t c = 0; c < cols; ++c) p[r * cols + c] *= row_scale;
    if (rng.below(4) == 0) {
      const int64_t b = static_cast<int64_t>(rng.below(static_cast<uint64_t>(cols / 16)));
      const float fill = rng.below(2) ? 0.0f : 1e-9f;
      for (int64_t c = b * 16; c < b * 16 + 16; ++c) p[r * cols + c] = fill * static_cast<float>(c % 5);
    }
  }
  if (dtype == DType::F32) return x;
  Tensor bf = Tensor::empty({rows, cols}, DType::BF16);
  convert_cpu(x, bf);
  return bf;
}

struct Case {
  int64_t rows, cols;
};

std::string label(const Case& shape, DType dtype, const Nvfp4QuantOptions& options) {
  return std::to_string(shape.rows) + "x" + std::to_string(shape.cols) + " " + std::string(dtype_name(dtype)) +
         (options.block == Nvfp4Block::Tile16x16 ? " 16x16" : " 1x16") +
         (options.rounding == Rounding::Stochastic ? " stochastic" : " rne");
}

std::vector<Nvfp4QuantOptions> all_options(int64_t rows) {
  std::vector<Nvfp4QuantOptions> out;
  for (Nvfp4Block block : {Nvfp4Block::Row1x16, Nvfp4Block::Tile16x16}) {
    if (block == Nvfp4Block::Tile16x16 && rows % 16 != 0) continue;
    for (Rounding rounding : {Rounding::NearestEven, Rounding::Stochastic}) {
      Nvfp4QuantOptions options;
      options.block = block;
      options.rounding = rounding;
      options.seed = 1234567;
      out.push_back(options);
    }
  }
  return out;
}

const Case kShapes[] = {{1, 16}, {3, 48}, {17, 272}, {16, 16}, {48, 4112}, {129, 160}, {256, 1024}, {1000, 64}};

TEST(Nvfp4Cuda, QuantizeIsBitIdenticalToCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(1);
  for (const Case& shape : kShapes)
    for (DType dtype : {DType::F32, DType::BF16}) {
      Tensor x = awkward_matrix(shape.rows, shape.cols, rng, dtype);
      Tensor gx = on_gpu(x);
      for (const Nvfp4QuantOptions& options : all_options(shape.rows)) {
        SCOPED_TRACE(label(shape, dtype, options));
        Nvfp4Tensor cpu = quantize_nvfp4(x, options);
        Nvfp4Tensor gpu = quantize_nvfp4(gx, options);
        ASSERT_TRUE(gpu.device().is_cuda());
        EXPECT_EQ(gpu.tensor_scale, cpu.tensor_scale);
        EXPECT_EQ(bytes_of(gpu.codes), bytes_of(cpu.codes));
        EXPECT_EQ(bytes_of(gpu.block_scales), bytes_of(cpu.block_scales));
      }
    }
}

TEST(Nvfp4Cuda, DequantizeIsBitIdenticalToCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(2);
  for (const Case& shape : kShapes) {
    // Arbitrary codes (all 16, including 8 = -0 as ModelOpt writes) and any non-NaN scale byte.
    Nvfp4Tensor q;
    q.rows = shape.rows;
    q.cols = shape.cols;
    q.tensor_scale = 3.7e-4f;
    q.codes = Tensor::empty({shape.rows, shape.cols / 2}, DType::E2M1x2);
    q.block_scales = Tensor::empty({shape.rows, shape.cols / 16}, DType::E4M3);
    uint8_t* codes = static_cast<uint8_t*>(q.codes.raw());
    uint8_t* scales = static_cast<uint8_t*>(q.block_scales.raw());
    for (int64_t i = 0; i < q.codes.numel(); ++i) codes[i] = static_cast<uint8_t>(rng.below(256));
    for (int64_t i = 0; i < q.block_scales.numel(); ++i) scales[i] = static_cast<uint8_t>(rng.below(0x7F));
    Nvfp4Tensor gq = on_gpu(q);
    for (DType dtype : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::to_string(shape.rows) + "x" + std::to_string(shape.cols) + " -> " +
                   std::string(dtype_name(dtype)));
      Tensor gpu = dequantize_nvfp4(gq, dtype);
      ASSERT_TRUE(gpu.device().is_cuda());
      EXPECT_EQ(bytes_of(gpu), bytes_of(dequantize_nvfp4(q, dtype)));
    }
  }
}

TEST(Nvfp4Cuda, FakeQuantizeIsBitIdenticalToCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(3);
  for (const Case& shape : kShapes)
    for (DType dtype : {DType::F32, DType::BF16}) {
      Tensor x = awkward_matrix(shape.rows, shape.cols, rng, dtype);
      Tensor gx = on_gpu(x);
      for (const Nvfp4QuantOptions& options : all_options(shape.rows))
        for (DType out_dtype : {DType::F32, DType::BF16}) {
          SCOPED_TRACE(label(shape, dtype, options) + " -> " + std::string(dtype_name(out_dtype)));
          Tensor cpu = Tensor::empty({shape.rows, shape.cols}, out_dtype);
          Tensor gpu = Tensor::empty({shape.rows, shape.cols}, out_dtype, Device::cuda(0));
          fake_quantize_nvfp4(x, cpu, options);
          fake_quantize_nvfp4(gx, gpu, options);
          EXPECT_EQ(bytes_of(gpu), bytes_of(cpu));
        }
    }
}

// W4A4 inference's activation quantizer (fixed input_scale, no amax pass): the CPU's bytes, with a scale a quarter of
// the matrix's own so blocks saturate, written into views of larger buffers.
TEST(Nvfp4Cuda, StaticQuantizeIsBitIdenticalToCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(6);
  for (const Case& shape : kShapes)
    for (DType dtype : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::to_string(shape.rows) + "x" + std::to_string(shape.cols) + " " +
                   std::string(dtype_name(dtype)));
      Tensor x = awkward_matrix(shape.rows, shape.cols, rng, dtype);
      Tensor gx = on_gpu(x);
      const float input_scale = quantize_nvfp4(x).tensor_scale / 4.0f;
      const int64_t n = shape.rows * shape.cols;
      Nvfp4Tensor cpu, gpu;
      Tensor gpu_codes = Tensor::empty({n + 64}, DType::E2M1x2, Device::cuda(0));
      Tensor gpu_scales = Tensor::empty({n / 16 + 64}, DType::E4M3, Device::cuda(0));
      cpu.codes = Tensor::empty({shape.rows, shape.cols / 2}, DType::E2M1x2);
      cpu.block_scales = Tensor::empty({shape.rows, shape.cols / 16}, DType::E4M3);
      gpu.codes = gpu_codes.narrow(0, 0, n / 2).reshape({shape.rows, shape.cols / 2});
      gpu.block_scales = gpu_scales.narrow(0, 0, n / 16).reshape({shape.rows, shape.cols / 16});
      quantize_nvfp4_static(x, input_scale, cpu);
      quantize_nvfp4_static(gx, input_scale, gpu);
      EXPECT_EQ(gpu.tensor_scale, input_scale);
      EXPECT_EQ(bytes_of(gpu.codes), bytes_of(cpu.codes));
      EXPECT_EQ(bytes_of(gpu.block_scales), bytes_of(cpu.block_scales));
    }
}

TEST(Nvfp4Cuda, LargeMatrixAmaxAndScale) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(4);
  Tensor x = test::random_normal({2048, 2560}, rng, 0.02f);
  x.data<float>()[1234567] = -0.75f;  // the amax, somewhere in the middle
  Nvfp4Tensor cpu = quantize_nvfp4(x), gpu = quantize_nvfp4(on_gpu(x));
  EXPECT_EQ(gpu.tensor_scale, nvfp4_tensor_scale(0.75f));
  EXPECT_EQ(gpu.tensor_scale, cpu.tensor_scale);
  EXPECT_EQ(bytes_of(gpu.codes), bytes_of(cpu.codes));
  EXPECT_EQ(bytes_of(gpu.block_scales), bytes_of(cpu.block_scales));
}

TEST(Nvfp4Cuda, NonFiniteErrorsMatchTheCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::F32, DType::BF16}) {
    Tensor f = Tensor::zeros({300, 64}, DType::F32);
    f.data<float>()[250 * 64 + 7] = std::numeric_limits<float>::infinity();
    f.data<float>()[37 * 64 + 50] = -std::numeric_limits<float>::quiet_NaN();
    Tensor x = f;
    if (dtype == DType::BF16) {
      x = Tensor::empty({300, 64}, DType::BF16);
      convert_cpu(f, x);
    }
    std::string cpu_message, gpu_message;
    try {
      quantize_nvfp4(x, {}, "blk.37");
    } catch (const Error& e) {
      cpu_message = e.what();
    }
    try {
      quantize_nvfp4(on_gpu(x), {}, "blk.37");
    } catch (const Error& e) {
      gpu_message = e.what();
    }
    EXPECT_NE(cpu_message.find("row 37, column 50"), std::string::npos) << cpu_message;
    EXPECT_EQ(gpu_message, cpu_message);
    Tensor out = Tensor::empty({300, 64}, DType::BF16, Device::cuda(0));
    EXPECT_THROW(fake_quantize_nvfp4(on_gpu(x), out, {}, "blk.37"), Error);
  }
}

TEST(Nvfp4Cuda, UnalignedViewsTakeTheScalarPaths) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(5);
  const int64_t rows = 33, cols = 96, n = rows * cols;
  Tensor x = awkward_matrix(rows, cols, rng, DType::F32);
  // The same values one float past an aligned address.
  Tensor flat = Tensor::zeros({n + 1}, DType::F32, Device::cuda(0));
  Tensor shifted = flat.narrow(0, 1, n).reshape({rows, cols});
  shifted.copy_from(on_gpu(x));
  Nvfp4Tensor cpu = quantize_nvfp4(x), gpu = quantize_nvfp4(shifted);
  EXPECT_EQ(bytes_of(gpu.codes), bytes_of(cpu.codes));
  EXPECT_EQ(bytes_of(gpu.block_scales), bytes_of(cpu.block_scales));
  // Codes one byte off alignment, output one element off alignment.
  Tensor code_bytes = Tensor::zeros({n / 2 + 1}, DType::U8, Device::cuda(0));
  Tensor shifted_codes = code_bytes.narrow(0, 1, n / 2).reshape({rows, cols / 2});
  shifted_codes.copy_from(on_gpu(cpu.codes.view_as(DType::U8)));
  Nvfp4Tensor q = on_gpu(cpu);
  q.codes = shifted_codes.view_as(DType::E2M1x2);
  for (DType dtype : {DType::F32, DType::BF16}) {
    Tensor out_flat = Tensor::zeros({n + 1}, dtype, Device::cuda(0));
    Tensor out = out_flat.narrow(0, 1, n).reshape({rows, cols});
    dequantize_nvfp4(q, out);
    EXPECT_EQ(bytes_of(out), bytes_of(dequantize_nvfp4(cpu, dtype)));
    Tensor fake_flat = Tensor::zeros({n + 1}, dtype, Device::cuda(0));
    Tensor fake = fake_flat.narrow(0, 1, n).reshape({rows, cols});
    fake_quantize_nvfp4(shifted, fake);
    EXPECT_EQ(bytes_of(fake), bytes_of(dequantize_nvfp4(cpu, dtype)));
  }
}

}  // namespace
}  // namespace nvfp4lm::test_nvfp4_cuda
