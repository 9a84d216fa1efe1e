// See dense_dot.h. The portable variant and the family's table; the x86 variants (ops/cpu/x86/dense_dot.cpp) run
// the same loop nest, like nvfp4_dot.cpp's: per weight row, per vector of columns,
// one load of the weight and a fused multiply-add into each of the n rows' accumulators (n is a template
// parameter so they live in registers); the last partial vector is masked; then each accumulator's lanes are
// summed. An accumulator only ever sees its own row, so its value does not depend on n.
#include "ops/cpu/dense_dot.h"

#include <vector>

#include "core/error.h"
#include "ops/cpu/x86/kernels.h"

namespace nvfp4lm::cpu {
namespace {

// ---- scalar: 16 fixed lanes per row (the compiler vectorizes the lane loop) -------------------------------------
constexpr int kScalarLanes = 16;

template <int N>
void dense_scalar(const DenseRows& w, int64_t first, int64_t last, const float* const* x, float* const* y) {
  for (int64_t o = first; o < last; ++o) {
    const float* row = w.data + o * w.ld;
    float lanes[N][kScalarLanes] = {};
    for (int64_t k0 = 0; k0 < w.cols; k0 += kScalarLanes) {
      const int64_t count = w.cols - k0 < kScalarLanes ? w.cols - k0 : kScalarLanes;
      for (int r = 0; r < N; ++r)
        for (int64_t i = 0; i < count; ++i) lanes[r][i] += row[k0 + i] * x[r][k0 + i];
    }
    for (int r = 0; r < N; ++r) {
      float sum = 0.f;
      for (float lane : lanes[r]) sum += lane;
      y[r][o] = sum;
    }
  }
}

std::vector<DenseDotFamily::Variant> dense_dot_variants() {
  std::vector<DenseDotFamily::Variant> variants;  // fastest first
#if NVFP4LM_X86_INTRINSICS
  variants.push_back({&kAvx512FIsa, x86::dense_dot_avx512()});
  variants.push_back({&kAvx2Isa, x86::dense_dot_avx2()});
#endif
  variants.push_back({&kScalarIsa, row_kernels<DenseDotFn>([]<int N>() { return &dense_scalar<N>; })});
  return variants;
}

}  // namespace

const DenseDotFamily& dense_dot_family() {
  static const DenseDotFamily family("dense dot", dense_dot_variants());
  return family;
}

void dense_dot_rows(const DenseDotFamily::Variant& variant, const DenseRows& w, int64_t first, int64_t last,
                    const float* const* x_rows, float* const* y_rows, int n) {
  NVFP4LM_ASSERT(n >= 1 && n <= kDotMaxRows, "dense_dot_rows: {} activation rows (1..{})", n, kDotMaxRows);
  NVFP4LM_ASSERT(w.cols >= 1 && w.ld >= w.cols, "dense_dot_rows: {} columns with leading dimension {}", w.cols, w.ld);
  dense_dot_family().check_runnable(variant);
  if (first >= last) return;
  variant.kernels[static_cast<size_t>(n - 1)](w, first, last, x_rows, y_rows);
}

}  // namespace nvfp4lm::cpu
