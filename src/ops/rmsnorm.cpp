// Shape checks and device dispatch for ops/rmsnorm.h.
#include "ops/rmsnorm.h"

#include "ops/cpu/rmsnorm.h"
#include "ops/dispatch.h"

#if NVFP4LM_HAS_CUDA
#include "ops/cuda/rmsnorm.h"
#include "ops/cuda/tensor_rows.h"
#endif

namespace nvfp4lm {
namespace {

int64_t norm_rows(const Tensor& x, const Tensor& weight, const char* op) {
  NVFP4LM_ASSERT(x.rank() >= 1 && weight.rank() == 1 && x.dim(-1) == weight.dim(0),
                 "{}: x {} does not end in weight's dim {}", op, x.str(), weight.str());
  return x.dim(-1) == 0 ? 0 : x.numel() / x.dim(-1);
}

#if NVFP4LM_HAS_CUDA
// CUDA operands: activations F32 or BF16 (one dtype), weight / rstd / dweight F32 and contiguous.
const float* cuda_f32(const Tensor& t, const char* what) {
  NVFP4LM_ASSERT(t.dtype() == DType::F32 && t.is_contiguous(), "{} on CUDA: {} must be contiguous F32", what, t.str());
  return static_cast<const float*>(t.raw());
}

void check_cuda_activations(const char* op, std::initializer_list<const Tensor*> tensors) {
  const DType dtype = (*tensors.begin())->dtype();
  for (const Tensor* t : tensors) {
    NVFP4LM_ASSERT(t->dtype() == dtype && (dtype == DType::F32 || dtype == DType::BF16),
                   "{} on CUDA: {} (activations share one dtype, F32 or BF16)", op, t->str());
  }
}
#endif

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd) {
  const int64_t rows = norm_rows(x, weight, "rmsnorm_forward");
  NVFP4LM_ASSERT(y.shape() == x.shape(), "rmsnorm_forward: y {} vs x {}", y.str(), x.str());
  NVFP4LM_ASSERT(rstd == nullptr || rstd->numel() == rows, "rmsnorm_forward: rstd {} for {} rows", rstd->str(), rows);
  [[maybe_unused]] const Device device = common_device("rmsnorm_forward", {&x, &weight, &y, rstd});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    check_cuda_activations("rmsnorm_forward", {&x, &y});
    float* rstd_out = rstd != nullptr ? const_cast<float*>(cuda_f32(*rstd, "rmsnorm_forward rstd")) : nullptr;
    cuda::rmsnorm_forward(cuda::device_rows(x, 1, "rmsnorm_forward x"), cuda_f32(weight, "rmsnorm_forward weight"), eps,
                          cuda::device_rows(y, 1, "rmsnorm_forward y"), rstd_out);
    return;
  }
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
  if (device.is_cuda()) {
    check_cuda_activations("rmsnorm_backward", {&dy, &x, &dx});
    const size_t scratch_bytes = cuda::rmsnorm_backward_scratch_bytes(rows, x.dim(-1));
    Tensor scratch =
        scratch_bytes > 0 ? Tensor::empty({static_cast<int64_t>(scratch_bytes)}, DType::U8, device) : Tensor();
    cuda::rmsnorm_backward(cuda::device_rows(dy, 1, "rmsnorm_backward dy"),
                           cuda::device_rows(x, 1, "rmsnorm_backward x"), cuda_f32(weight, "rmsnorm_backward weight"),
                           cuda_f32(rstd, "rmsnorm_backward rstd"), cuda::device_rows(dx, 1, "rmsnorm_backward dx"),
                           const_cast<float*>(cuda_f32(dweight, "rmsnorm_backward dweight")),
                           scratch.defined() ? scratch.raw() : nullptr);
    return;
  }
#endif
  cpu::rmsnorm_backward(dy, x, weight, rstd, dx, dweight);
}

}  // namespace nvfp4lm
