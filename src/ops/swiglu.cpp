// Shape checks and device dispatch for ops/swiglu.h.
#include "ops/swiglu.h"

#include "ops/cpu/swiglu.h"
#include "ops/dispatch.h"

#if NVFP4LM_HAS_CUDA
#include "ops/cuda/swiglu.h"
#include "ops/cuda/tensor_rows.h"
#endif

namespace nvfp4lm {
namespace {

#if NVFP4LM_HAS_CUDA
void check_cuda_dtypes(const char* op, std::initializer_list<const Tensor*> tensors) {
  const DType dtype = (*tensors.begin())->dtype();
  for (const Tensor* t : tensors) {
    NVFP4LM_ASSERT(t->dtype() == dtype && (dtype == DType::F32 || dtype == DType::BF16),
                   "{} on CUDA: {} (all operands share one dtype, F32 or BF16)", op, t->str());
  }
}
#endif

}  // namespace

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  NVFP4LM_ASSERT(up.shape() == gate.shape() && out.shape() == gate.shape(), "swiglu_forward: gate {}, up {}, out {}",
                 gate.str(), up.str(), out.str());
  [[maybe_unused]] const Device device = common_device("swiglu_forward", {&gate, &up, &out});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    check_cuda_dtypes("swiglu_forward", {&gate, &up, &out});
    cuda::swiglu_forward(cuda::device_rows(gate, 1, "swiglu_forward gate"),
                         cuda::device_rows(up, 1, "swiglu_forward up"),
                         cuda::device_rows(out, 1, "swiglu_forward out"));
    return;
  }
#endif
  cpu::swiglu_forward(gate, up, out);
}

void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup) {
  NVFP4LM_ASSERT(up.shape() == gate.shape() && dout.shape() == gate.shape() && dgate.shape() == gate.shape() &&
                     dup.shape() == gate.shape(),
                 "swiglu_backward: dout {}, gate {}, up {}, dgate {}, dup {}", dout.str(), gate.str(), up.str(),
                 dgate.str(), dup.str());
  [[maybe_unused]] const Device device = common_device("swiglu_backward", {&dout, &gate, &up, &dgate, &dup});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    check_cuda_dtypes("swiglu_backward", {&dout, &gate, &up, &dgate, &dup});
    cuda::swiglu_backward(
        cuda::device_rows(dout, 1, "swiglu_backward dout"), cuda::device_rows(gate, 1, "swiglu_backward gate"),
        cuda::device_rows(up, 1, "swiglu_backward up"), cuda::device_rows(dgate, 1, "swiglu_backward dgate"),
        cuda::device_rows(dup, 1, "swiglu_backward dup"));
    return;
  }
#endif
  cpu::swiglu_backward(dout, gate, up, dgate, dup);
}

}  // namespace nvfp4lm
