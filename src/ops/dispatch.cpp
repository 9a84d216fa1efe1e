// Device dispatch helpers shared by the ops (see dispatch.h).
#include "ops/dispatch.h"

namespace nvfp4lm {

Device common_device(const char* op, std::initializer_list<const Tensor*> operands) {
  bool found = false;
  Device device = Device::cpu();
  for (const Tensor* operand : operands) {
    if (operand == nullptr || !operand->defined()) continue;
    if (!found) {
      device = operand->device();
      found = true;
      continue;
    }
    NVFP4LM_ASSERT(operand->device() == device, "{}: operands on {} and {} (all operands must share one device)", op,
                   device.str(), operand->device().str());
  }
  return device;
}

Tensor flatten_rows(const Tensor& t, const char* what) {
  NVFP4LM_ASSERT(t.defined() && t.rank() >= 1, "{}: needs a tensor of rank >= 1, got {}", what, t.str());
  if (t.rank() == 2) return t;
  if (t.rank() == 1) return t.reshape({1, t.dim(0)});
  NVFP4LM_ASSERT(t.is_contiguous(), "{}: {} of rank > 2 must be contiguous to flatten", what, t.str());
  return t.reshape({t.numel() / t.dim(-1), t.dim(-1)});
}

}  // namespace nvfp4lm
