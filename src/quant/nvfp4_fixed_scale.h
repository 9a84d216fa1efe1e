// NVFP4 quantization with a tensor scale chosen by the caller, for the two file formats that need one other
// than the weight's own amax / (6 * 448):
//  - `.dat` stores no tensor scale (it reads back with 1), so its weights are quantized with tensor scale 1;
//  - the ModelOpt layout is loaded by vLLM / TensorRT-LLM, which fuse q/k/v (and gate/up) into one GEMM with
//    ONE tensor scale (they take the max of the three weight_scale_2); ModelOpt therefore quantizes such
//    groups with a shared tensor scale from the group's joint amax, and so do we.
// It is quantize_nvfp4 with Nvfp4QuantOptions::tensor_scale set (plus F16 input). CPU only, round-to-nearest-even,
// 1x16 or 16x16 blocks.
#pragma once

#include <string>

#include "core/tensor.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

// Largest magnitude of a CPU F32/BF16/F16 tensor; Error (naming `what`, row and column) on a non-finite value.
float weight_amax(const Tensor& weight, const std::string& what);

// Quantizes a CPU [rows, cols] F32/BF16/F16 matrix with the given tensor scale (finite, positive).
Nvfp4Tensor quantize_nvfp4_with_tensor_scale(const Tensor& weight, float tensor_scale, Nvfp4Block block,
                                             const std::string& what);

// Sum of squared differences between dequantize(q) and `reference` and sum of squares of `reference`, both in
// double, computed in row chunks so no full F32 copy of a large matrix is made. reference: [rows, cols]
// F32/BF16/F16 CPU. relative RMS error = sqrt(error / norm).
struct QuantizationError {
  double squared_error = 0;
  double squared_norm = 0;
  double relative_rms() const;
};
QuantizationError nvfp4_quantization_error(const Nvfp4Tensor& q, const Tensor& reference);

}  // namespace nvfp4lm
