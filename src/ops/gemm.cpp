// Shape checks and device dispatch for ops/gemm.h. The linear layer is expressed through gemm(), so a
// CUDA twin of gemm serves it too.
#include "ops/gemm.h"

#include "ops/batch_invariance.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/linear_rows.h"
#include "ops/dispatch.h"

#if NVFP4LM_HAS_CUDA
#include "ops/cuda/gemm.h"
#include "ops/cuda/row_exact_linear.h"
#include "ops/cuda/tensor_rows.h"
#endif

namespace nvfp4lm {
namespace {

#if NVFP4LM_HAS_CUDA
cuda::GemmMatrix cuda_matrix(const Tensor& t, const char* what) {
  const cuda::DeviceRows rows = cuda::device_matrix(t, what);
  return cuda::GemmMatrix{rows.data, rows.dtype, rows.count, rows.width, rows.inner_stride};
}
#endif

}  // namespace

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c, float alpha, float beta) {
  NVFP4LM_ASSERT(a.rank() == 2 && b.rank() == 2 && c.rank() == 2, "gemm: operands must be 2-D, got {}, {}, {}", a.str(),
                 b.str(), c.str());
  const int64_t m = transpose_a ? a.dim(1) : a.dim(0);
  const int64_t k = transpose_a ? a.dim(0) : a.dim(1);
  const int64_t kb = transpose_b ? b.dim(1) : b.dim(0);
  const int64_t n = transpose_b ? b.dim(0) : b.dim(1);
  NVFP4LM_ASSERT(k == kb && c.dim(0) == m && c.dim(1) == n,
                 "gemm: op(A) {}{} x op(B) {}{} does not give C {} (M={}, K={}, K'={}, N={})", a.shape().str(),
                 transpose_a ? "ᵀ" : "", b.shape().str(), transpose_b ? "ᵀ" : "", c.shape().str(), m, k, kb, n);
  [[maybe_unused]] const Device device = common_device("gemm", {&a, &b, &c});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    NVFP4LM_ASSERT(a.dtype() == b.dtype() && cuda::gemm_supported(a.dtype(), c.dtype()),
                   "gemm on CUDA: {} x {} -> {} (A and B BF16 / F16 with C of their type or F32, or all F32)", a.str(),
                   b.str(), c.str());
    cuda::gemm(cuda_matrix(a, "gemm A"), transpose_a, cuda_matrix(b, "gemm B"), transpose_b, cuda_matrix(c, "gemm C"),
               alpha, beta);
    return;
  }
#endif
  cpu::gemm(a, transpose_a, b, transpose_b, c, alpha, beta);
}

void linear_forward(const Tensor& x, const Tensor& w, Tensor& y, LinearRows rows) {
  Tensor x2 = flatten_rows(x, "linear_forward x");
  Tensor y2 = flatten_rows(y, "linear_forward y");
  // Prefill rows too: sgemm's result for a row may depend on the rows beside it (ops/linear_rows.h). On CUDA the
  // same holds of cuBLASLt; its row-exact twin runs in batch-invariant mode only (ops/batch_invariance.h).
  if (rows != LinearRows::Batch) {
    NVFP4LM_ASSERT(w.rank() == 2 && x2.dim(1) == w.dim(1) && y2.dim(1) == w.dim(0) && x2.dim(0) == y2.dim(0),
                   "linear_forward: x {} · wᵀ {} does not give y {}", x.str(), w.str(), y.str());
    const Device device = common_device("linear_forward", {&x2, &w, &y2});
    if (device.is_cpu()) {
      cpu::linear_forward_independent_rows(x2, w, y2);
      return;
    }
#if NVFP4LM_HAS_CUDA
    if (batch_invariant_kernels()) {
      NVFP4LM_ASSERT(x2.dtype() == w.dtype() && cuda::row_exact_linear_supported(w.dtype(), y2.dtype()),
                     "linear_forward: no row-exact CUDA kernel for x {} · wᵀ {} -> y {} (BF16, F16 or F32 inputs)",
                     x2.str(), w.str(), y2.str());
      cuda::row_exact_linear(cuda::device_matrix(x2, "linear_forward x"), cuda::device_matrix(w, "linear_forward w"),
                             cuda::device_matrix(y2, "linear_forward y"));
      return;
    }
#endif
  }
  gemm(x2, false, w, true, y2);
}

void linear_backward_input(const Tensor& dy, const Tensor& w, Tensor& dx, bool accumulate) {
  Tensor dy2 = flatten_rows(dy, "linear_backward_input dy");
  Tensor dx2 = flatten_rows(dx, "linear_backward_input dx");
  gemm(dy2, false, w, false, dx2, 1.f, accumulate ? 1.f : 0.f);
}

void linear_backward_weight(const Tensor& dy, const Tensor& x, Tensor& dw) {
  Tensor dy2 = flatten_rows(dy, "linear_backward_weight dy");
  Tensor x2 = flatten_rows(x, "linear_backward_weight x");
  gemm(dy2, true, x2, false, dw, 1.f, 1.f);
}

}  // namespace nvfp4lm
