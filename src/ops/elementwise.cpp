// Shape checks and device dispatch for ops/elementwise.h.
#include "ops/elementwise.h"

#include "ops/cpu/elementwise.h"
#include "ops/dispatch.h"

namespace nvfp4lm {

void add_inplace(Tensor& a, const Tensor& b) { add(a, b, a); }

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  NVFP4LM_ASSERT(b.shape() == a.shape() && out.shape() == a.shape(), "add: a {}, b {}, out {}", a.str(), b.str(),
                 out.str());
  [[maybe_unused]] const Device device = common_device("add", {&a, &b, &out});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("add");  // -> cuda::add(a, b, out); return;
#endif
  cpu::add(a, b, out);
}

void scale_inplace(Tensor& a, float s) {
  [[maybe_unused]] const Device device = common_device("scale_inplace", {&a});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("scale_inplace");  // -> cuda::scale_inplace(a, s); return;
#endif
  cpu::scale_inplace(a, s);
}

void fill(Tensor& a, float value) {
  [[maybe_unused]] const Device device = common_device("fill", {&a});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("fill");  // -> cuda::fill(a, value); return;
#endif
  cpu::fill(a, value);
}

void cast(const Tensor& src, Tensor& dst) {
  NVFP4LM_ASSERT(src.shape() == dst.shape() && dtype_is_float(src.dtype()) && dtype_is_float(dst.dtype()),
                 "cast: {} -> {} (float types of one shape only)", src.str(), dst.str());
  [[maybe_unused]] const Device device = common_device("cast", {&src, &dst});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("cast");  // -> cuda::cast(src, dst); return;
#endif
  cpu::cast(src, dst);
}

double sum_squares(const Tensor& a) {
  [[maybe_unused]] const Device device = common_device("sum_squares", {&a});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("sum_squares");  // -> return cuda::sum_squares(a);
#endif
  return cpu::sum_squares(a);
}

}  // namespace nvfp4lm
