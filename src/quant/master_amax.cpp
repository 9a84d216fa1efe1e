#include "quant/master_amax.h"

#include "quant/nvfp4_fixed_scale.h"

#if NVFP4LM_HAS_CUDA
#include "quant/cuda/nvfp4_cuda.h"
#endif

namespace nvfp4lm {

float master_weight_amax(const Tensor& master, const std::string& what) {
  NVFP4LM_ASSERT(master.defined(), "{}: no master weight", what);
  if (master.device().is_cpu()) return weight_amax(master, what);
#if NVFP4LM_HAS_CUDA
  NVFP4LM_ASSERT(master.dtype() == DType::F32 || master.dtype() == DType::BF16,
                 "{}: master weight on {} is {}, expected F32 or BF16", what, master.device().str(), master.str());
  const Tensor input = master.contiguous();
  // Any shape as the matrix [numel / last dim, last dim] (a scalar is [1, 1]).
  const int64_t cols = input.rank() >= 1 ? input.dim(-1) : 1;
  const int64_t rows = cols ? input.numel() / cols : 0;
  Tensor scratch = Tensor::empty({cuda::kNvfp4AmaxScratchBytes}, DType::U8, input.device());
  const cuda::Nvfp4AmaxResult result =
      cuda::nvfp4_amax(input.raw(), input.dtype() == DType::BF16, rows, cols, scratch.raw());
  if (result.first_non_finite >= 0) {  // the message of weight_amax
    const int64_t bad = result.first_non_finite;
    NVFP4LM_FAIL("{}: non-finite value {} at row {}, column {}", what, result.non_finite_value, cols ? bad / cols : 0,
                 cols ? bad % cols : 0);
  }
  return result.amax;
#else
  NVFP4LM_FAIL("{}: master weight on {} in a build without CUDA", what, master.device().str());
#endif
}

}  // namespace nvfp4lm
