// Shape checks and device dispatch for ops/nvfp4_linear.h.
#include "ops/nvfp4_linear.h"

#include <algorithm>

#include "ops/cpu/nvfp4_interleaved.h"
#include "ops/cpu/nvfp4_linear.h"
#include "ops/dispatch.h"

#if NVFP4LM_HAS_CUDA
#include "ops/cuda/nvfp4_linear.h"
#include "ops/gemm.h"
#endif

namespace nvfp4lm {
namespace {

#if NVFP4LM_HAS_CUDA
// CUDA (ops/cuda/nvfp4_linear.h): up to kNvfp4FusedMaxRows rows run the fused W4A16 kernel ("cuda/nvfp4-w4a16",
// one mma column per row of x, so 8 is also the most it takes); more rows (or shapes the kernel does not take:
// in % 32 != 0, unaligned views) dequantize blocks of output rows into the BF16 scratch and call gemm
// (cuBLASLt), "cuda/dequant-gemm". The crossover is a tuning point: the fused kernel reads the weight once per
// call, dequant + gemm writes and re-reads 2 bytes per weight but runs at tensor-core speed in N.
void cuda_nvfp4_linear_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& y, Tensor& scratch, LinearRows rows) {
  NVFP4LM_ASSERT(x.dtype() == DType::BF16 && y.dtype() == DType::BF16 && x.stride(1) == 1 && y.stride(1) == 1,
                 "nvfp4_linear_forward: on CUDA x {} and y {} must be BF16 with unit inner stride", x.str(), y.str());
  NVFP4LM_ASSERT(w.codes.is_contiguous() && w.block_scales.is_contiguous() && w.block_scales.dtype() == DType::E4M3,
                 "nvfp4_linear_forward: codes {} / block scales {} must be contiguous (E2M1x2 or U8, E4M3)",
                 w.codes.str(), w.block_scales.str());
  const int64_t n = x.dim(0);
  if (n == 0) return;
  const auto* codes = static_cast<const uint8_t*>(w.codes.raw());
  const auto* scales = static_cast<const uint8_t*>(w.block_scales.raw());
  const int64_t group = std::min(n, kNvfp4FusedMaxRows);
  if ((n <= kNvfp4FusedMaxRows || rows == LinearRows::Independent) &&
      cuda::nvfp4_gemv_supported(x.raw(), x.stride(0), codes, group, w.cols)) {
    // Independent rows: 8 at a time through the fused kernel (one mma column per row, so a row's result does not
    // depend on the others); the weight is read once per group.
    const size_t element = dtype_bytes(x.dtype());
    for (int64_t first = 0; first < n; first += kNvfp4FusedMaxRows) {
      const int64_t count = std::min(kNvfp4FusedMaxRows, n - first);
      cuda::nvfp4_gemv(static_cast<const char*>(x.raw()) + first * x.stride(0) * element, x.stride(0), codes, scales,
                       w.tensor_scale, count, w.rows, w.cols,
                       static_cast<char*>(y.raw()) + first * y.stride(0) * element, y.stride(0));
    }
    return;
  }
  NVFP4LM_ASSERT(scratch.dtype() == DType::BF16, "nvfp4_linear_forward: the CUDA scratch must be BF16, got {}",
                 scratch.str());
  const int64_t block_rows = std::min(w.rows, scratch.numel() / w.cols);
  const Tensor flat_scratch = scratch.reshape({scratch.numel()});
  for (int64_t first = 0; first < w.rows; first += block_rows) {
    const int64_t count = std::min(block_rows, w.rows - first);
    Nvfp4Tensor part = w;
    part.codes = w.codes.narrow(0, first, count);
    part.block_scales = w.block_scales.narrow(0, first, count);
    part.rows = count;
    Tensor dense = flat_scratch.narrow(0, 0, count * w.cols).reshape({count, w.cols});
    dequantize_nvfp4(part, dense);
    Tensor y_part = y.narrow(1, first, count);
    gemm(x, false, dense, true, y_part);
  }
}
#endif

}  // namespace

int64_t nvfp4_linear_scratch_elements(const Nvfp4Tensor& w) { return w.rows * w.cols; }

Nvfp4Tensor nvfp4_for_cpu_int8_decode(const Nvfp4Tensor& w) {
  if (!w.device().is_cpu() || w.layout != Nvfp4Layout::Rows || !cpu::int8_decode_interleaves()) return w;
  return cpu::interleave_nvfp4_tensor(w);
}

const char* nvfp4_linear_compute_path(Device device, CpuMatmul matmul) {
  if (device.is_cpu()) {
    switch (matmul) {
      case CpuMatmul::Fp32:
        return "cpu/dequant-gemm";
      case CpuMatmul::Bf16Activations:
        return "cpu/nvfp4-bf16";
      case CpuMatmul::Int8Activations:
        return "cpu/nvfp4-int8";
    }
  }
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) return "cuda/nvfp4-w4a16";  // decode rows; prefill dequantizes into gemm
#endif
  NVFP4LM_FAIL(
      "no NVFP4 linear kernel for {} yet (neither cuda/nvfp4-w4a16 nor cuda/dequant-gemm is built): run NVFP4 "
      "models on the CPU (--device cpu)",
      device.str());
}

void nvfp4_linear_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& y, Tensor& scratch, LinearRows rows,
                          CpuMatmul matmul) {
  if (w.layout == Nvfp4Layout::Interleaved16) {
    NVFP4LM_ASSERT(w.codes.device().is_cpu() && w.codes.is_contiguous() &&
                       w.codes.numel() == cpu::interleaved_nvfp4_bytes(w.rows, w.cols),
                   "nvfp4_linear_forward: malformed interleaved NVFP4 weight (codes {}, [{}, {}])", w.codes.str(),
                   w.rows, w.cols);
  } else {
    NVFP4LM_ASSERT(w.defined() && w.codes.rank() == 2 && w.codes.dim(0) == w.rows && w.codes.dim(1) * 2 == w.cols,
                   "nvfp4_linear_forward: malformed NVFP4 weight (codes {}, [{}, {}])", w.codes.str(), w.rows, w.cols);
  }
  Tensor x2 = flatten_rows(x, "nvfp4_linear_forward x");
  Tensor y2 = flatten_rows(y, "nvfp4_linear_forward y");
  NVFP4LM_ASSERT(x2.dim(1) == w.cols && y2.dim(1) == w.rows && x2.dim(0) == y2.dim(0),
                 "nvfp4_linear_forward: x {} · wᵀ [{}, {}] does not give y {}", x.str(), w.rows, w.cols, y.str());
  NVFP4LM_ASSERT(scratch.is_contiguous() && scratch.numel() >= w.cols,
                 "nvfp4_linear_forward: scratch {} holds less than one row of the weight [{}, {}]", scratch.str(),
                 w.rows, w.cols);
  const Tensor* codes = &w.codes;
  const Tensor* scales = w.layout == Nvfp4Layout::Rows ? &w.block_scales : &w.codes;  // interleaved: in the codes
  [[maybe_unused]] const Device device = common_device("nvfp4_linear_forward", {&x2, &y2, codes, scales, &scratch});
#if NVFP4LM_HAS_CUDA
  // Also the seam for a Blackwell FP4 tensor-core GEMM (see ops/cuda/nvfp4_linear.h).
  if (device.is_cuda()) return cuda_nvfp4_linear_forward(x2, w, y2, scratch, rows);
#endif
  cpu::nvfp4_linear_forward(x2, w, y2, scratch, rows == LinearRows::Independent, matmul);
}

}  // namespace nvfp4lm
