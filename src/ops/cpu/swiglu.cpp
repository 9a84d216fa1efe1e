// CPU SwiGLU: elementwise, parallel over rows; each row runs in a kernel cloned per vector width with a
// vectorisable exp. Every element is read before it is written, so outputs may alias inputs element for
// element (in place).
#include "ops/cpu/swiglu.h"

#include "ops/cpu/simd.h"
#include "ops/cpu/vector_math.h"
#include "ops/cpu/views.h"

namespace nvfp4lm::cpu {
namespace {

constexpr int64_t kParallelElements = 16384;

// out = gate / (1 + exp(-gate)) * up  (torch's silu form)
NVFP4LM_CPU_CLONES void swiglu_row(const float* gate, const float* up, float* out, int64_t width) {
#pragma omp simd
  for (int64_t j = 0; j < width; ++j) out[j] = gate[j] / (1.f + exp_vectorizable(-gate[j])) * up[j];
}

NVFP4LM_CPU_CLONES void swiglu_backward_row(const float* dout, const float* gate, const float* up, float* dgate,
                                            float* dup, int64_t width) {
#pragma omp simd
  for (int64_t j = 0; j < width; ++j) {
    const float g = gate[j], u = up[j], d = dout[j];
    const float sig = 1.f / (1.f + exp_vectorizable(-g));
    dup[j] = d * g * sig;
    dgate[j] = d * u * sig * (1.f + g * (1.f - sig));
  }
}

}  // namespace

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  const RowsF32 gs(gate, 1, "swiglu_forward gate"), us(up, 1, "swiglu_forward up"), os(out, 1, "swiglu_forward out");
  const int64_t rows = gs.count(), width = gs.width();
#pragma omp parallel for schedule(static) if (rows * width > kParallelElements)
  for (int64_t r = 0; r < rows; ++r) swiglu_row(gs.row(r), us.row(r), os.row(r), width);
}

void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup) {
  const RowsF32 ds(dout, 1, "swiglu_backward dout"), gs(gate, 1, "swiglu_backward gate");
  const RowsF32 us(up, 1, "swiglu_backward up"), dgs(dgate, 1, "swiglu_backward dgate");
  const RowsF32 dus(dup, 1, "swiglu_backward dup");
  const int64_t rows = gs.count(), width = gs.width();
#pragma omp parallel for schedule(static) if (rows * width > kParallelElements)
  for (int64_t r = 0; r < rows; ++r)
    swiglu_backward_row(ds.row(r), gs.row(r), us.row(r), dgs.row(r), dus.row(r), width);
}

}  // namespace nvfp4lm::cpu
