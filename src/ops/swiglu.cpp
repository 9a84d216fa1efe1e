// Shape checks and device dispatch for ops/swiglu.h.
#include "ops/swiglu.h"

#include "ops/cpu/swiglu.h"
#include "ops/dispatch.h"

namespace nvfp4lm {

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  NVFP4LM_ASSERT(up.shape() == gate.shape() && out.shape() == gate.shape(), "swiglu_forward: gate {}, up {}, out {}",
                 gate.str(), up.str(), out.str());
  [[maybe_unused]] const Device device = common_device("swiglu_forward", {&gate, &up, &out});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("swiglu_forward");  // -> cuda::swiglu_forward(...); return;
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
  if (device.is_cuda()) no_cuda_implementation("swiglu_backward");  // -> cuda::swiglu_backward(...); return;
#endif
  cpu::swiglu_backward(dout, gate, up, dgate, dup);
}

}  // namespace nvfp4lm
