// Shape checks and device dispatch for ops/nvfp4_w4a4_linear.h.
#include "ops/nvfp4_w4a4_linear.h"

#include "core/error.h"
#include "ops/dispatch.h"
#include "ops/gemm.h"

#if NVFP4LM_HAS_CUDA
#include "ops/cuda/nvfp4_w4a4_cublaslt.h"
#include "ops/cuda/nvfp4_w4a4_gemm.h"
#endif

namespace nvfp4lm {
namespace {

void check_operand(const Nvfp4Tensor& q, const char* what) {
  NVFP4LM_ASSERT(q.defined() && q.layout == Nvfp4Layout::Rows, "nvfp4_w4a4_linear_forward: {} must be NVFP4 rows",
                 what);
  NVFP4LM_ASSERT(q.cols % kNvfp4BlockSize == 0 && q.codes.dim(0) == q.rows && q.codes.dim(1) == q.cols / 2 &&
                     q.block_scales.dim(0) == q.rows && q.block_scales.dim(1) == q.cols / kNvfp4BlockSize &&
                     q.codes.is_contiguous() && q.block_scales.is_contiguous(),
                 "nvfp4_w4a4_linear_forward: {} is not a contiguous [{}, {}] NVFP4 matrix", what, q.rows, q.cols);
}

#if NVFP4LM_HAS_CUDA
cuda::Nvfp4Operand operand_of(const Nvfp4Tensor& q) {
  cuda::Nvfp4Operand o;
  o.codes = static_cast<const uint8_t*>(q.codes.raw());
  o.scales = static_cast<const uint8_t*>(q.block_scales.raw());
  o.rows = q.rows;
  return o;
}
#endif

}  // namespace

bool nvfp4_w4a4_native(Device device, std::string* why_not) {
  if (device.is_cpu()) return true;
#if NVFP4LM_HAS_CUDA
  const char *mma = nullptr, *cublaslt = nullptr;
  if (cuda::nvfp4_w4a4_gemm_available(&mma) || cuda::nvfp4_w4a4_cublaslt_available(&cublaslt)) return true;
  if (why_not) *why_not = fmt::format("{}: {}; {}: {}", kNvfp4W4a4CudaPath, mma, kNvfp4W4a4CublasLtPath, cublaslt);
#else
  if (why_not) *why_not = "this build has no CUDA backend";
#endif
  return false;
}

bool nvfp4_w4a4_path_available(Device device, std::string_view path, std::string* why_not) {
  NVFP4LM_ASSERT(device.is_cuda() && (path == kNvfp4W4a4CudaPath || path == kNvfp4W4a4CublasLtPath),
                 "nvfp4_w4a4_path_available: {} on {}", path, device.str());
#if NVFP4LM_HAS_CUDA
  const char* reason = nullptr;
  const bool available = path == kNvfp4W4a4CudaPath ? cuda::nvfp4_w4a4_gemm_available(&reason)
                                                    : cuda::nvfp4_w4a4_cublaslt_available(&reason);
  if (why_not && reason) *why_not = reason;
  return available;
#else
  if (why_not) *why_not = "this build has no CUDA backend";
  return false;
#endif
}

const char* nvfp4_w4a4_compute_path(Device device) {
  if (device.is_cpu()) return kNvfp4W4a4CpuPath;
  std::string why_not;
  NVFP4LM_CHECK(nvfp4_w4a4_native(device, &why_not), "NVFP4 W4A4 linears do not run natively on {}: {}", device.str(),
                why_not);
#if NVFP4LM_HAS_CUDA
  if (cuda::nvfp4_w4a4_gemm_available()) return kNvfp4W4a4CudaPath;
#endif
  return kNvfp4W4a4CublasLtPath;
}

void nvfp4_w4a4_linear_forward(const Nvfp4Tensor& x, const Nvfp4Tensor& w, Tensor& y) {
  check_operand(x, "x");
  check_operand(w, "w");
  NVFP4LM_ASSERT(x.cols == w.cols && y.rank() == 2 && y.dim(0) == x.rows && y.dim(1) == w.rows && y.stride(1) == 1,
                 "nvfp4_w4a4_linear_forward: x [{}, {}] · w [{}, {}]ᵀ does not give y {}", x.rows, x.cols, w.rows,
                 w.cols, y.shape().str());
  const Device device =
      common_device("nvfp4_w4a4_linear_forward", {&x.codes, &x.block_scales, &w.codes, &w.block_scales, &y});
  if (device.is_cpu()) {
    NVFP4LM_ASSERT(y.dtype() == DType::F32, "nvfp4_w4a4_linear_forward: CPU y must be F32");
    const Tensor x_values = dequantize_nvfp4(x, DType::F32), w_values = dequantize_nvfp4(w, DType::F32);
    gemm(x_values, false, w_values, true, y);
    return;
  }
#if NVFP4LM_HAS_CUDA
  NVFP4LM_ASSERT(y.dtype() == DType::BF16, "nvfp4_w4a4_linear_forward: CUDA y must be BF16");
  std::string why_not;
  NVFP4LM_CHECK(nvfp4_w4a4_native(device, &why_not), "NVFP4 W4A4 linear ({}) is not available on {}: {}",
                kNvfp4W4a4CudaPath, device.str(), why_not);
  cuda::Nvfp4W4a4Gemm problem;
  problem.x = operand_of(x);
  problem.w = operand_of(w);
  problem.k = x.cols;
  problem.alpha = x.tensor_scale * w.tensor_scale;
  problem.y = y.raw();
  problem.y_row_stride = y.stride(0);
  if (cuda::nvfp4_w4a4_gemm_available()) {
    NVFP4LM_ASSERT(cuda::nvfp4_w4a4_gemm_supported(problem), "nvfp4_w4a4_linear_forward: unsupported operands");
    cuda::nvfp4_w4a4_gemm(problem);
    return;
  }
  NVFP4LM_CHECK(cuda::nvfp4_w4a4_cublaslt_supported(problem),
                "{}: y [{}, {}] = x [{}, {}] · w [{}, {}]ᵀ: cuBLASLt's FP4 kernels need k a multiple of 32 and "
                "16-byte aligned rows (y's row stride {} a multiple of 8)",
                kNvfp4W4a4CublasLtPath, x.rows, w.rows, x.rows, x.cols, w.rows, w.cols, y.stride(0));
  // Both operands' scales in cuBLASLt's tiled layout (the weight's too: laid out at each call, 1/8 of its codes'
  // bytes).
  Tensor x_scales = Tensor::empty({cuda::nvfp4_cublaslt_scale_bytes(x.rows, x.cols)}, DType::U8, device);
  Tensor w_scales = Tensor::empty({cuda::nvfp4_cublaslt_scale_bytes(w.rows, w.cols)}, DType::U8, device);
  cuda::nvfp4_lay_out_block_scales(problem.x.scales, x.rows, x.cols, static_cast<uint8_t*>(x_scales.raw()));
  cuda::nvfp4_lay_out_block_scales(problem.w.scales, w.rows, w.cols, static_cast<uint8_t*>(w_scales.raw()));
  cuda::nvfp4_w4a4_cublaslt_gemm(problem, static_cast<const uint8_t*>(x_scales.raw()),
                                 static_cast<const uint8_t*>(w_scales.raw()));
#else
  NVFP4LM_CHECK(false, "NVFP4 W4A4 linear on {}: this build has no CUDA backend", device.str());
#endif
}

}  // namespace nvfp4lm
