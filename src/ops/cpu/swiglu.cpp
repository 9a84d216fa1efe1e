// CPU SwiGLU: elementwise, parallel over rows; each row runs in a kernel compiled per x86-64 level (the family
// below) with a vectorisable exp. Every element is read before it is written, so outputs may alias inputs element
// for element (in place).
#include "ops/cpu/swiglu.h"

#include "ops/cpu/kernel_family.h"
#include "ops/cpu/vector_math.h"
#include "ops/cpu/views.h"
#include "ops/cpu/x86/levels.h"

namespace nvfp4lm::cpu {
namespace {

constexpr int64_t kSwigluParallelElements = 16384;

// out = gate / (1 + exp(-gate)) * up  (torch's silu form)
[[gnu::always_inline]] inline void swiglu_row(const float* gate, const float* up, float* out, int64_t width) {
#pragma omp simd
  for (int64_t j = 0; j < width; ++j) out[j] = gate[j] / (1.f + exp_vectorizable(-gate[j])) * up[j];
}

[[gnu::always_inline]] inline void swiglu_backward_row(const float* dout, const float* gate, const float* up,
                                                       float* dgate, float* dup, int64_t width) {
#pragma omp simd
  for (int64_t j = 0; j < width; ++j) {
    const float g = gate[j], u = up[j], d = dout[j];
    const float sig = 1.f / (1.f + exp_vectorizable(-g));
    dup[j] = d * g * sig;
    dgate[j] = d * u * sig * (1.f + g * (1.f - sig));
  }
}

struct SwigluKernels {
  void (*forward)(const float*, const float*, float*, int64_t);
  void (*backward)(const float*, const float*, const float*, float*, float*, int64_t);
};

const KernelFamily<SwigluKernels>& swiglu_family() {
  static const KernelFamily<SwigluKernels> family(
      "swiglu", level_variants<SwigluKernels>([]<KernelLevel L>() {
        return SwigluKernels{kernel_at<swiglu_row, L>(), kernel_at<swiglu_backward_row, L>()};
      }));
  return family;
}

}  // namespace

const KernelFamilyInfo& swiglu_kernel_family() { return swiglu_family(); }

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  const RowsF32 gs(gate, 1, "swiglu_forward gate"), us(up, 1, "swiglu_forward up"), os(out, 1, "swiglu_forward out");
  const int64_t rows = gs.count(), width = gs.width();
  const auto row_kernel = swiglu_family().chosen().kernels.forward;
#pragma omp parallel for schedule(static) if (rows * width > kSwigluParallelElements)
  for (int64_t r = 0; r < rows; ++r) row_kernel(gs.row(r), us.row(r), os.row(r), width);
}

void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup) {
  const RowsF32 ds(dout, 1, "swiglu_backward dout"), gs(gate, 1, "swiglu_backward gate");
  const RowsF32 us(up, 1, "swiglu_backward up"), dgs(dgate, 1, "swiglu_backward dgate");
  const RowsF32 dus(dup, 1, "swiglu_backward dup");
  const int64_t rows = gs.count(), width = gs.width();
  const auto row_kernel = swiglu_family().chosen().kernels.backward;
#pragma omp parallel for schedule(static) if (rows * width > kSwigluParallelElements)
  for (int64_t r = 0; r < rows; ++r) row_kernel(ds.row(r), gs.row(r), us.row(r), dgs.row(r), dus.row(r), width);
}

}  // namespace nvfp4lm::cpu
