// Shape checks and device dispatch for ops/elementwise.h.
#include "ops/elementwise.h"

#include "ops/cpu/elementwise.h"
#include "ops/dispatch.h"

#if NVFP4LM_HAS_CUDA
#include "ops/cuda/elementwise.h"
#include "ops/cuda/tensor_rows.h"
#endif

namespace nvfp4lm {

void add_inplace(Tensor& a, const Tensor& b) { add(a, b, a); }

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  NVFP4LM_ASSERT(b.shape() == a.shape() && out.shape() == a.shape(), "add: a {}, b {}, out {}", a.str(), b.str(),
                 out.str());
  [[maybe_unused]] const Device device = common_device("add", {&a, &b, &out});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    NVFP4LM_ASSERT(dtype_is_float(a.dtype()) && b.dtype() == a.dtype() && out.dtype() == a.dtype(),
                   "add on CUDA: a {}, b {}, out {} must share one float dtype", a.str(), b.str(), out.str());
    cuda::add(cuda::device_rows(a, 1, "add a"), cuda::device_rows(b, 1, "add b"), cuda::device_rows(out, 1, "add out"));
    return;
  }
#endif
  cpu::add(a, b, out);
}

void mul_inplace(Tensor& a, const Tensor& b) {
  NVFP4LM_ASSERT(b.shape() == a.shape(), "mul_inplace: a {}, b {}", a.str(), b.str());
  [[maybe_unused]] const Device device = common_device("mul_inplace", {&a, &b});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    NVFP4LM_ASSERT(dtype_is_float(a.dtype()) && b.dtype() == a.dtype(),
                   "mul_inplace on CUDA: a {}, b {} must share one float dtype", a.str(), b.str());
    cuda::mul(cuda::device_rows(a, 1, "mul_inplace a"), cuda::device_rows(b, 1, "mul_inplace b"),
              cuda::device_rows(a, 1, "mul_inplace a"));
    return;
  }
#endif
  cpu::mul_inplace(a, b);
}

void scale_inplace(Tensor& a, float s) {
  [[maybe_unused]] const Device device = common_device("scale_inplace", {&a});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    NVFP4LM_ASSERT(dtype_is_float(a.dtype()), "scale_inplace on CUDA: {} is not a float tensor", a.str());
    cuda::scale(cuda::device_rows(a, 1, "scale_inplace a"), s);
    return;
  }
#endif
  cpu::scale_inplace(a, s);
}

void fill(Tensor& a, float value) {
  [[maybe_unused]] const Device device = common_device("fill", {&a});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    NVFP4LM_ASSERT(dtype_is_float(a.dtype()), "fill on CUDA: {} is not a float tensor", a.str());
    cuda::fill(cuda::device_rows(a, 1, "fill a"), value);
    return;
  }
#endif
  cpu::fill(a, value);
}

void cast(const Tensor& src, Tensor& dst) {
  NVFP4LM_ASSERT(src.shape() == dst.shape() && dtype_is_float(src.dtype()) && dtype_is_float(dst.dtype()),
                 "cast: {} -> {} (float types of one shape only)", src.str(), dst.str());
  [[maybe_unused]] const Device device = common_device("cast", {&src, &dst});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    cuda::cast(cuda::device_rows(src, 1, "cast src"), cuda::device_rows(dst, 1, "cast dst"));
    return;
  }
#endif
  cpu::cast(src, dst);
}

void dropout(const Tensor& src, Tensor& dst, float p, uint64_t seed, bool accumulate) {
  NVFP4LM_ASSERT(src.shape() == dst.shape() && p >= 0.f && p < 1.f, "dropout: src {}, dst {}, p {}", src.str(),
                 dst.str(), p);
  [[maybe_unused]] const Device device = common_device("dropout", {&src, &dst});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    NVFP4LM_ASSERT(dtype_is_float(src.dtype()) && dst.dtype() == src.dtype(),
                   "dropout on CUDA: src {} and dst {} must share one float dtype", src.str(), dst.str());
    cuda::dropout(cuda::device_rows(src, 1, "dropout src"), cuda::device_rows(dst, 1, "dropout dst"), p, seed,
                  accumulate);
    return;
  }
#endif
  cpu::dropout(src, dst, p, seed, accumulate);
}

double sum_squares(const Tensor& a) {
  [[maybe_unused]] const Device device = common_device("sum_squares", {&a});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    NVFP4LM_ASSERT(dtype_is_float(a.dtype()), "sum_squares on CUDA: {} is not a float tensor", a.str());
    Tensor scratch = Tensor::empty({static_cast<int64_t>(cuda::sum_squares_scratch_bytes())}, DType::U8, device);
    return cuda::sum_squares(cuda::device_rows(a, 1, "sum_squares a"), scratch.raw());
  }
#endif
  return cpu::sum_squares(a);
}

}  // namespace nvfp4lm
