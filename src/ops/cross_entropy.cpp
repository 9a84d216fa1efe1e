// Shape checks and device dispatch for ops/cross_entropy.h.
#include "ops/cross_entropy.h"

#include "ops/cpu/cross_entropy.h"
#include "ops/dispatch.h"
#include "ops/gemm.h"

namespace nvfp4lm {

CrossEntropyResult lm_head_cross_entropy(const Tensor& hidden, const Tensor& lm_head, const Tensor& targets,
                                         float grad_scale, Tensor* dhidden, Tensor* dweight) {
  NVFP4LM_ASSERT(hidden.rank() == 2 && lm_head.rank() == 2 && hidden.dim(1) == lm_head.dim(1),
                 "lm_head_cross_entropy: hidden {} must be [N, H] and lm_head {} [V, H]", hidden.str(), lm_head.str());
  NVFP4LM_ASSERT(targets.dtype() == DType::I32 && targets.rank() == 1 && targets.dim(0) == hidden.dim(0),
                 "lm_head_cross_entropy: targets {} must be I32 [{}]", targets.str(), hidden.dim(0));
  NVFP4LM_ASSERT(dhidden == nullptr || dhidden->shape() == hidden.shape(),
                 "lm_head_cross_entropy: dhidden {} vs hidden {}", dhidden->str(), hidden.str());
  NVFP4LM_ASSERT(dweight == nullptr || dweight->shape() == lm_head.shape(),
                 "lm_head_cross_entropy: dweight {} vs lm_head {}", dweight->str(), lm_head.str());
  [[maybe_unused]] const Device device =
      common_device("lm_head_cross_entropy", {&hidden, &lm_head, &targets, dhidden, dweight});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("lm_head_cross_entropy");  // -> return cuda::lm_head_cross_entropy(...);
#endif
  return cpu::lm_head_cross_entropy(hidden, lm_head, targets, grad_scale, dhidden, dweight);
}

void lm_head_logits(const Tensor& hidden, const Tensor& lm_head, Tensor& logits) {
  linear_forward(hidden, lm_head, logits);
}

}  // namespace nvfp4lm
