// See tensor_amax.h.
#include "quant/tensor_amax.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/numeric.h"

#if NVFP4LM_HAS_CUDA
#include "quant/cuda/nvfp4_cuda.h"
#endif

namespace nvfp4lm {
namespace {

// Below this many elements a parallel region costs more than it saves (and small matrices are common in tests).
constexpr int64_t kAmaxParallelElements = int64_t{1} << 15;

struct F32Load {
  const float* data;
  float operator()(int64_t i) const { return data[i]; }
};
struct Bf16Load {
  const uint16_t* data;
  float operator()(int64_t i) const { return bf16_to_float(data[i]); }
};
struct F16Load {
  const uint16_t* data;
  float operator()(int64_t i) const { return f16_to_float(data[i]); }
};

// The matrix [rows, cols] a tensor of any shape is read as.
int64_t matrix_cols(const Tensor& tensor) { return tensor.rank() >= 1 ? tensor.dim(-1) : 1; }

// Largest magnitude of the contiguous `input`; fails naming the first (lowest row, then column) non-finite element.
template <typename Load>
float amax_cpu(Load load, const Tensor& input, int64_t rows, int64_t cols, const std::string& what) {
  float amax = 0.0f;
  int64_t bad_index = std::numeric_limits<int64_t>::max();
#pragma omp parallel for schedule(static) reduction(max     \
                                                    : amax) \
    reduction(min                                           \
              : bad_index) if (rows * cols >= kAmaxParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    float row_amax = 0.0f;
    bool bad = false;
    for (int64_t c = 0; c < cols; ++c) {
      const float magnitude = std::fabs(load(r * cols + c));
      row_amax = std::max(row_amax, magnitude);
      bad |= !(magnitude <= FLT_MAX);  // inf and NaN
    }
    if (bad) {
      for (int64_t c = 0; c < cols; ++c)
        if (!(std::fabs(load(r * cols + c)) <= FLT_MAX)) {
          bad_index = std::min(bad_index, r * cols + c);
          break;
        }
    }
    amax = std::max(amax, row_amax);
  }
  if (bad_index != std::numeric_limits<int64_t>::max())
    fail_non_finite_element(input, bad_index, load(bad_index), what);
  return amax;
}

}  // namespace

void fail_non_finite_element(const Tensor& tensor, int64_t index, float value, const std::string& what) {
  const int64_t cols = matrix_cols(tensor);
  const int64_t rows = cols ? tensor.numel() / cols : 0;
  NVFP4LM_FAIL("{}: non-finite value {} at row {}, column {} of [{}, {}]", what, value, cols ? index / cols : 0,
               cols ? index % cols : 0, rows, cols);
}

float tensor_amax(const Tensor& tensor, const std::string& what) {
  NVFP4LM_CHECK(tensor.defined(), "{}: no tensor to measure", what);
  const Tensor input = tensor.contiguous();
  const int64_t cols = matrix_cols(input);
  const int64_t rows = cols ? input.numel() / cols : 0;
  if (input.device().is_cpu()) {
    switch (input.dtype()) {
      case DType::F32:
        return amax_cpu(F32Load{static_cast<const float*>(input.raw())}, input, rows, cols, what);
      case DType::BF16:
        return amax_cpu(Bf16Load{static_cast<const uint16_t*>(input.raw())}, input, rows, cols, what);
      case DType::F16:
        return amax_cpu(F16Load{static_cast<const uint16_t*>(input.raw())}, input, rows, cols, what);
      default:
        NVFP4LM_FAIL("{}: the amax reads F32, BF16 or F16 tensors, got {}", what, input.str());
    }
  }
#if NVFP4LM_HAS_CUDA
  NVFP4LM_CHECK(input.dtype() == DType::F32 || input.dtype() == DType::BF16,
                "{}: the amax reads F32 or BF16 tensors on {}, got {}", what, input.device().str(), input.str());
  Tensor scratch = Tensor::empty({cuda::kNvfp4AmaxScratchBytes}, DType::U8, input.device());
  const cuda::Nvfp4AmaxResult result =
      cuda::nvfp4_amax(input.raw(), input.dtype() == DType::BF16, rows, cols, scratch.raw());
  if (result.first_non_finite >= 0)
    fail_non_finite_element(input, result.first_non_finite, result.non_finite_value, what);
  return result.amax;
#else
  NVFP4LM_FAIL("{}: tensor on {} in a build without CUDA", what, input.device().str());
#endif
}

}  // namespace nvfp4lm
