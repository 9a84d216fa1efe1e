#include "quant/nvfp4_fixed_scale.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/numeric.h"
#include "quant/nvfp4_block.h"

namespace nvfp4lm {
namespace {

// Reads element i of a contiguous F32/BF16/F16 buffer as fp32.
struct FloatLoader {
  const void* data;
  DType dtype;
  float operator()(int64_t i) const {
    switch (dtype) {
      case DType::BF16:
        return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
      case DType::F16:
        return f16_to_float(static_cast<const uint16_t*>(data)[i]);
      default:
        return static_cast<const float*>(data)[i];
    }
  }
};

Tensor checked_matrix(const Tensor& weight, const std::string& what) {
  NVFP4LM_CHECK(weight.defined() && weight.device().is_cpu() && dtype_is_float(weight.dtype()),
                "{}: expected a CPU F32/BF16/F16 tensor, got {}", what, weight.defined() ? weight.str() : "nothing");
  return weight.contiguous();
}

}  // namespace

Nvfp4Tensor quantize_nvfp4_with_tensor_scale(const Tensor& weight, float tensor_scale, Nvfp4Block block,
                                             const std::string& what) {
  Tensor input = checked_matrix(weight, what);
  NVFP4LM_CHECK(std::isfinite(tensor_scale) && tensor_scale > 0.0f, "{}: tensor scale {} must be finite and positive",
                what, tensor_scale);
  if (input.dtype() == DType::F16) {  // the codec reads F32 and BF16; F16 -> F32 is exact
    Tensor widened = Tensor::empty(input.shape(), DType::F32);
    convert_cpu(input, widened);
    input = widened;
  }
  Nvfp4QuantOptions options;
  options.block = block;
  options.tensor_scale = tensor_scale;
  return quantize_nvfp4(input, options, what.c_str());
}

double QuantizationError::relative_rms() const {
  if (squared_norm > 0) return std::sqrt(squared_error / squared_norm);
  return squared_error > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

QuantizationError nvfp4_quantization_error(const Nvfp4Tensor& q, const Tensor& reference) {
  validate_nvfp4(q, "quantization error");
  const Tensor input = checked_matrix(reference, "quantization error reference");
  NVFP4LM_CHECK(input.rank() == 2 && input.dim(0) == q.rows && input.dim(1) == q.cols,
                "quantization error: reference {} does not match the quantized [{}, {}]", input.str(), q.rows, q.cols);
  NVFP4LM_CHECK(q.device().is_cpu(), "quantization error: the quantized weight must be on the CPU");
  const FloatLoader load{input.raw(), input.dtype()};
  const auto* codes = static_cast<const uint8_t*>(q.codes.raw());
  const auto* scales = static_cast<const uint8_t*>(q.block_scales.raw());
  const int64_t rows = q.rows, cols = q.cols, col_blocks = cols / kNvfp4BlockSize;
  double squared_error = 0, squared_norm = 0;
#pragma omp parallel for schedule(static) reduction(+ : squared_error, squared_norm)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < col_blocks; ++b) {
      const float denominator = nvfp4_dequant_scale(scales[r * col_blocks + b], q.tensor_scale);
      for (int64_t k = 0; k < kNvfp4BlockSize; ++k) {
        const int64_t c = b * kNvfp4BlockSize + k;
        const uint8_t byte = codes[r * (cols / 2) + c / 2];
        const uint8_t code = (c % 2) ? e2m1_high_code(byte) : e2m1_low_code(byte);
        const double value = nvfp4_decode(code, denominator);
        const double expected = load(r * cols + c);
        squared_error += (value - expected) * (value - expected);
        squared_norm += expected * expected;
      }
    }
  }
  return {squared_error, squared_norm};
}

}  // namespace nvfp4lm
