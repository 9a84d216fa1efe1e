// Shape checks and device dispatch for ops/nvfp4_linear.h.
#include "ops/nvfp4_linear.h"

#include <algorithm>

#include "ops/batch_invariance.h"
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
// The fused kernel's view of x rows [first, first + count) and of a weight with its output rows.
cuda::Nvfp4Gemv gemv_of(const Tensor& x, int64_t first, int64_t count) {
  cuda::Nvfp4Gemv g;
  g.x = static_cast<const char*>(x.raw()) + first * x.stride(0) * static_cast<int64_t>(dtype_bytes(x.dtype()));
  g.x_row_stride = x.stride(0);
  g.n_rows = count;
  g.in_features = x.dim(1);
  g.weight_count = 0;
  return g;
}

void add_weight(cuda::Nvfp4Gemv& g, const Nvfp4Tensor& w, const Tensor& y, int64_t first) {
  cuda::Nvfp4GemvWeight& out = g.weights[g.weight_count++];
  out.codes = static_cast<const uint8_t*>(w.codes.raw());
  out.scales = static_cast<const uint8_t*>(w.block_scales.raw());
  out.tensor_scale = w.tensor_scale;
  out.rows = w.rows;
  out.y = static_cast<char*>(y.raw()) + first * y.stride(0) * static_cast<int64_t>(dtype_bytes(y.dtype()));
  out.y_row_stride = y.stride(0);
}

bool cuda_weight_fits(const Nvfp4Tensor& w) {
  return w.layout == Nvfp4Layout::Rows && w.codes.device().is_cuda() && w.codes.is_contiguous() &&
         w.block_scales.is_contiguous() && w.block_scales.dtype() == DType::E4M3;
}

// Runs `problem` on x's rows in groups of kNvfp4GemvMaxRows (each row's result does not depend on its group).
template <typename AddWeights>
void gemv_in_groups(const Tensor& x, cuda::Nvfp4GemvEpilogue epilogue, AddWeights&& add_weights) {
  for (int64_t first = 0; first < x.dim(0); first += cuda::kNvfp4GemvMaxRows) {
    cuda::Nvfp4Gemv g = gemv_of(x, first, std::min(cuda::kNvfp4GemvMaxRows, x.dim(0) - first));
    g.epilogue = epilogue;
    add_weights(g, first);
    NVFP4LM_ASSERT(cuda::nvfp4_gemv_supported(g), "NVFP4 fused kernel: the shapes were checked, x {}", x.str());
    cuda::nvfp4_gemv(g);
  }
}

// CUDA (ops/cuda/nvfp4_linear.h): up to kNvfp4GemvMaxRows rows run the fused W4A16 kernel ("cuda/nvfp4-w4a16",
// the rows of x as the mma's columns, 4 tiles of 8 at most), and so do Independent rows in groups of that many
// (Prefill rows too with batch-invariant kernels); more Batch or Prefill rows (or shapes the kernel does not take:
// in % 32 != 0, unaligned views) dequantize blocks of output rows into the BF16 scratch and call gemm (cuBLASLt),
// "cuda/dequant-gemm". The crossover is a tuning point: the fused kernel reads the weight once per call, dequant +
// gemm writes and re-reads 2 bytes per weight but runs at tensor-core speed in N.
void cuda_nvfp4_linear_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& y, Tensor& scratch, LinearRows rows) {
  NVFP4LM_ASSERT(x.dtype() == DType::BF16 && y.dtype() == DType::BF16 && x.stride(1) == 1 && y.stride(1) == 1,
                 "nvfp4_linear_forward: on CUDA x {} and y {} must be BF16 with unit inner stride", x.str(), y.str());
  NVFP4LM_ASSERT(cuda_weight_fits(w),
                 "nvfp4_linear_forward: codes {} / block scales {} must be contiguous (E2M1x2 or U8, E4M3)",
                 w.codes.str(), w.block_scales.str());
  const int64_t n = x.dim(0);
  if (n == 0) return;
  cuda::Nvfp4Gemv probe = gemv_of(x, 0, std::min(n, cuda::kNvfp4GemvMaxRows));
  add_weight(probe, w, y, 0);
  // Prefill rows are Batch rows here unless the kernels are batch-invariant (ops/batch_invariance.h): then they and
  // Independent rows run the fused kernel whatever their number, whose sums do not depend on the rows beside them.
  const bool exact_rows = rows == LinearRows::Independent || (rows == LinearRows::Prefill && batch_invariant_kernels());
  const bool fused = cuda::nvfp4_gemv_supported(probe);
  NVFP4LM_CHECK(fused || !exact_rows || !batch_invariant_kernels(),
                "nvfp4_linear_forward: batch-invariant kernels (--deterministic) need the fused NVFP4 kernel, which "
                "does not take x {} with weight [{}, {}] (it needs inputs a multiple of 32 and 16-byte aligned rows); "
                "run without --deterministic",
                x.str(), w.rows, w.cols);
  if ((n <= cuda::kNvfp4GemvMaxRows || exact_rows) && fused) {
    gemv_in_groups(x, cuda::Nvfp4GemvEpilogue::Store,
                   [&](cuda::Nvfp4Gemv& g, int64_t first) { add_weight(g, w, y, first); });
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

bool nvfp4_decode_fusions_supported(const Tensor& x, std::initializer_list<const Nvfp4Tensor*> weights) {
#if NVFP4LM_HAS_CUDA
  if (!x.device().is_cuda() || x.dtype() != DType::BF16 || x.rank() != 2 || x.stride(1) != 1 || x.dim(0) == 0)
    return false;
  cuda::Nvfp4Gemv probe = gemv_of(x, 0, std::min(x.dim(0), cuda::kNvfp4GemvMaxRows));
  for (const Nvfp4Tensor* w : weights) {
    if (w == nullptr || !w->defined() || !cuda_weight_fits(*w) || w->cols != x.dim(1)) return false;
    probe.weight_count = 0;
    add_weight(probe, *w, x, 0);  // the output is not looked at
    if (!cuda::nvfp4_gemv_supported(probe)) return false;
  }
  return true;
#else
  (void)x;
  (void)weights;
  return false;
#endif
}

namespace {

// The fused forms' operand checks: x and each y on CUDA, BF16, rows that match.
void check_fused(const char* what, const Tensor& x, std::initializer_list<const Nvfp4Tensor*> weights,
                 std::initializer_list<const Tensor*> outputs) {
  NVFP4LM_ASSERT(nvfp4_decode_fusions_supported(x, weights), "{}: the fused kernel does not take x {}", what, x.str());
  size_t i = 0;
  for (const Tensor* y : outputs) {
    const Nvfp4Tensor* w = weights.begin()[std::min(i++, weights.size() - 1)];
    NVFP4LM_ASSERT(y->rank() == 2 && y->dtype() == DType::BF16 && y->stride(1) == 1 && y->dim(0) == x.dim(0) &&
                       y->dim(1) == w->rows && y->device() == x.device(),
                   "{}: output {} for x {} and a weight of {} rows", what, y->str(), x.str(), w->rows);
  }
}

}  // namespace

void nvfp4_linears_forward(const Tensor& x, std::initializer_list<std::pair<const Nvfp4Tensor*, Tensor*>> outputs) {
  NVFP4LM_ASSERT(outputs.size() >= 1 && outputs.size() <= 3, "nvfp4_linears_forward: {} weights (1 to 3)",
                 outputs.size());
#if NVFP4LM_HAS_CUDA
  for (const auto& [w, y] : outputs) check_fused("nvfp4_linears_forward", x, {w}, {y});
  gemv_in_groups(x, cuda::Nvfp4GemvEpilogue::Store, [&](cuda::Nvfp4Gemv& g, int64_t first) {
    for (const auto& [w, y] : outputs) add_weight(g, *w, *y, first);
  });
#endif
}

void nvfp4_linear_add_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& residual) {
  check_fused("nvfp4_linear_add_forward", x, {&w}, {&residual});
#if NVFP4LM_HAS_CUDA
  gemv_in_groups(x, cuda::Nvfp4GemvEpilogue::AddResidual,
                 [&](cuda::Nvfp4Gemv& g, int64_t first) { add_weight(g, w, residual, first); });
#endif
}

void nvfp4_swiglu_forward(const Tensor& x, const Nvfp4Tensor& gate, const Nvfp4Tensor& up, Tensor& out) {
  check_fused("nvfp4_swiglu_forward", x, {&gate, &up}, {&out});
  NVFP4LM_ASSERT(gate.rows == up.rows, "nvfp4_swiglu_forward: gate of {} rows, up of {}", gate.rows, up.rows);
#if NVFP4LM_HAS_CUDA
  gemv_in_groups(x, cuda::Nvfp4GemvEpilogue::SwiGlu, [&](cuda::Nvfp4Gemv& g, int64_t first) {
    add_weight(g, gate, out, first);
    add_weight(g, up, out, first);  // not written: the SwiGLU epilogue stores into the first weight's output
  });
#endif
}

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
  cpu::nvfp4_linear_forward(x2, w, y2, scratch, rows, matmul);
}

}  // namespace nvfp4lm
