// Helpers of the NVFP4 x NVFP4 GEMM tests (test_nvfp4_w4a4_cuda.cpp: SM 12.x's FP4 mma; test_nvfp4_w4a4_cublaslt.cpp:
// SM 10.x's cuBLASLt): an operand's exact values and the GEMM run into a poisoned, padded y.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/numeric.h"
#include "core/tensor.h"
#include "ops/nvfp4_w4a4_linear.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::test {

inline const Device kGpu = Device::cuda(0);

// Whether the GPU is the emulated device (whose sums the tests state exactly) or a real one (bounds instead).
#if NVFP4LM_CUDA_EMULATION
inline constexpr bool kEmulated = true;
#else
inline constexpr bool kEmulated = false;
#endif

// Element (row, k) of a CPU NVFP4 operand without its tensor scale: code x E4M3 block scale, exact in double.
inline double element(const Nvfp4Tensor& q, int64_t row, int64_t k) {
  const auto* codes = static_cast<const uint8_t*>(q.codes.raw());
  const auto* scales = static_cast<const uint8_t*>(q.block_scales.raw());
  const uint8_t byte = codes[row * (q.cols / 2) + k / 2];
  const uint8_t code = k % 2 == 0 ? e2m1_low_code(byte) : e2m1_high_code(byte);
  return static_cast<double>(e2m1_to_float(code)) * e4m3_to_float(scales[row * (q.cols / 16) + k / 16]);
}

inline Nvfp4Tensor on_gpu(const Nvfp4Tensor& q) {
  Nvfp4Tensor g = q;
  g.codes = q.codes.to(kGpu);
  g.block_scales = q.block_scales.to(kGpu);
  return g;
}

// y = x · wᵀ on the GPU into a view of a NaN-poisoned [m, n + padding] buffer; returns the BF16 bits of the view and
// checks the padding was never written.
inline std::vector<uint16_t> gpu_forward(const Nvfp4Tensor& x, const Nvfp4Tensor& w, int64_t padding = 3) {
  const int64_t padded = w.rows + padding;
  std::vector<float> nan(static_cast<size_t>(x.rows * padded), std::numeric_limits<float>::quiet_NaN());
  Tensor poisoned = Tensor::empty({x.rows, padded}, DType::BF16);
  convert_cpu(Tensor::from_floats(nan, {x.rows, padded}), poisoned);
  Tensor y_wide = poisoned.to(kGpu);
  Tensor y = y_wide.narrow(1, 0, w.rows);
  nvfp4_w4a4_linear_forward(on_gpu(x), on_gpu(w), y);
  const Tensor host = y_wide.to(Device::cpu());
  const auto* bits = static_cast<const uint16_t*>(host.raw());
  std::vector<uint16_t> out(static_cast<size_t>(x.rows * w.rows));
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t n = 0; n < w.rows; ++n) out[static_cast<size_t>(m * w.rows + n)] = bits[m * padded + n];
    for (int64_t n = w.rows; n < padded; ++n)
      EXPECT_TRUE(std::isnan(bf16_to_float(bits[m * padded + n]))) << "wrote y's padding at row " << m;
  }
  return out;
}

}  // namespace nvfp4lm::test
