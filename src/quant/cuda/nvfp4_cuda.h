// CUDA twin of the NVFP4 codec (quant/nvfp4.h), implemented in quant/cuda/nvfp4.cu. Same rules
// (quant/nvfp4_block.h), so codes, scales, tensor scale and decoded values are bit-identical to the CPU
// reference for the same input, with round-to-nearest-even and with stochastic rounding.
// These are raw-pointer launchers: quant/nvfp4.cpp (and, for the amax, quant/tensor_amax.cpp) check arguments,
// allocate, format errors and call them. (The .cu file stays free of Tensor and fmt, whose compile-time format
// strings nvcc cannot compile in C++20.) Matrices are contiguous row-major [rows, cols], cols a multiple of 16
// (rows too in tile mode; nvfp4_amax takes any shape); `bf16` says whether a float matrix is BF16 (else F32).
// Everything runs on cuda::stream() of the current device.
#pragma once

#include <cstdint>

namespace nvfp4lm::cuda {

struct Nvfp4AmaxResult {
  float amax = 0.0f;
  int64_t first_non_finite = -1;  // lowest flat index of an inf/NaN element, -1 when all are finite
  float non_finite_value = 0.0f;  // its value
};

inline constexpr int64_t kNvfp4AmaxScratchBytes = 16;

// max |x| over the finite elements of the matrix (exact: a maximum, so the CPU's tensor_amax gives the same) and
// its first non-finite element; synchronizes the stream to read them back. Any rows and cols, 0 included: a tensor
// of any shape is the matrix [numel / last dim, last dim]. scratch: kNvfp4AmaxScratchBytes of device memory.
Nvfp4AmaxResult nvfp4_amax(const void* input, bool bf16, int64_t rows, int64_t cols, void* scratch);

struct Nvfp4KernelOptions {
  float tensor_scale = 1.0f;
  bool tile = false;        // 16x16 tiles share a scale
  bool stochastic = false;  // else round to nearest even
  uint64_t seed = 0;
};

// codes: [rows, cols/2] bytes, scales: [rows, cols/16] bytes.
void nvfp4_quantize(const void* input, bool bf16, int64_t rows, int64_t cols, const Nvfp4KernelOptions& options,
                    uint8_t* codes, uint8_t* scales);
// out: [rows, cols], BF16 when out_bf16 else F32; the decoded values of what nvfp4_quantize would produce.
void nvfp4_fake_quantize(const void* input, bool bf16, int64_t rows, int64_t cols, const Nvfp4KernelOptions& options,
                         void* out, bool out_bf16);
void nvfp4_dequantize(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, float tensor_scale,
                      void* out, bool out_bf16);

}  // namespace nvfp4lm::cuda
