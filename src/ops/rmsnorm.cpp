// Shape checks and device dispatch for ops/rmsnorm.h.
#include "ops/rmsnorm.h"

#include "ops/cpu/rmsnorm.h"
#include "ops/dispatch.h"

namespace nvfp4lm {
namespace {

int64_t norm_rows(const Tensor& x, const Tensor& weight, const char* op) {
  NVFP4LM_ASSERT(x.rank() >= 1 && weight.rank() == 1 && x.dim(-1) == weight.dim(0),
                 "{}: x {} does not end in weight's dim {}", op, x.str(), weight.str());
  return x.dim(-1) == 0 ? 0 : x.numel() / x.dim(-1);
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd) {
  const int64_t rows = norm_rows(x, weight, "rmsnorm_forward");
  NVFP4LM_ASSERT(y.shape() == x.shape(), "rmsnorm_forward: y {} vs x {}", y.str(), x.str());
  NVFP4LM_ASSERT(rstd == nullptr || rstd->numel() == rows, "rmsnorm_forward: rstd {} for {} rows", rstd->str(), rows);
  [[maybe_unused]] const Device device = common_device("rmsnorm_forward", {&x, &weight, &y, rstd});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("rmsnorm_forward");  // -> cuda::rmsnorm_forward(...); return;
#endif
  cpu::rmsnorm_forward(x, weight, eps, y, rstd);
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight) {
  const int64_t rows = norm_rows(x, weight, "rmsnorm_backward");
  NVFP4LM_ASSERT(dy.shape() == x.shape() && dx.shape() == x.shape(), "rmsnorm_backward: dy {}, dx {} vs x {}", dy.str(),
                 dx.str(), x.str());
  NVFP4LM_ASSERT(dweight.shape() == weight.shape(), "rmsnorm_backward: dweight {} vs weight {}", dweight.str(),
                 weight.str());
  NVFP4LM_ASSERT(rstd.defined() && rstd.numel() == rows, "rmsnorm_backward: rstd {} for {} rows", rstd.str(), rows);
  [[maybe_unused]] const Device device = common_device("rmsnorm_backward", {&dy, &x, &weight, &rstd, &dx, &dweight});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("rmsnorm_backward");  // -> cuda::rmsnorm_backward(...); return;
#endif
  cpu::rmsnorm_backward(dy, x, weight, rstd, dx, dweight);
}

}  // namespace nvfp4lm
