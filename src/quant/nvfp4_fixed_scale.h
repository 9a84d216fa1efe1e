// NVFP4 quantization with a tensor scale chosen by the caller, for outputs that need one other than the weight's
// own amax / (6 * 448): the shared scale of a fused group (quant/nvfp4_group_scale.h), or 1 for a format that
// stores none (io/model_formats.h).
// It is quantize_nvfp4 with Nvfp4QuantOptions::tensor_scale set (plus F16 input). CPU only, round-to-nearest-even,
// 1x16 or 16x16 blocks.
#pragma once

#include <string>

#include "core/tensor.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

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
