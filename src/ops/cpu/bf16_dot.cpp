// See bf16_dot.h. n (1..8) is a template parameter so the per-row sums stay in registers; a BF16 becomes fp32 by
// moving its bits to the top half of a 32-bit lane.
#include "ops/cpu/bf16_dot.h"

#include <vector>

#include "core/error.h"
#include "core/numeric.h"
#include "ops/cpu/x86/kernels.h"

namespace nvfp4lm::cpu {
namespace {

template <int N>
void bf16_dot_rows_scalar(const Bf16Rows& w, int64_t first, int64_t last, const float* const* x, float* const* y) {
  constexpr int kLanes = 16;
  for (int64_t o = first; o < last; ++o) {
    const uint16_t* row = w.data + o * w.ld;
    float lanes[N][kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= w.cols; k += kLanes) {
      for (int r = 0; r < N; ++r)
        for (int i = 0; i < kLanes; ++i) lanes[r][i] += bf16_to_float(row[k + i]) * x[r][k + i];
    }
    for (int r = 0; r < N; ++r) {
      float sum = 0;
      for (float lane : lanes[r]) sum += lane;
      for (int64_t kk = k; kk < w.cols; ++kk) sum += bf16_to_float(row[kk]) * x[r][kk];
      y[r][o] = sum;
    }
  }
}

std::vector<Bf16DotFamily::Variant> bf16_dot_variants() {
  std::vector<Bf16DotFamily::Variant> variants;  // fastest first
#if NVFP4LM_X86_INTRINSICS
  variants.push_back({&kAvx512FIsa, x86::bf16_dot_avx512()});
  variants.push_back({&kAvx2Isa, x86::bf16_dot_avx2()});
#endif
  variants.push_back({&kScalarIsa, row_kernels<Bf16DotFn>([]<int N>() { return &bf16_dot_rows_scalar<N>; })});
  return variants;
}

}  // namespace

const Bf16DotFamily& bf16_dot_family() {
  static const Bf16DotFamily family("bf16 dot", bf16_dot_variants());
  return family;
}

void bf16_dot_rows(const Bf16DotFamily::Variant& variant, const Bf16Rows& w, int64_t first, int64_t last,
                   const float* const* x_rows, float* const* y_rows, int n) {
  NVFP4LM_ASSERT(n >= 1 && n <= kDotMaxRows, "bf16_dot_rows: {} activation rows (1..{})", n, kDotMaxRows);
  bf16_dot_family().check_runnable(variant);
  if (first >= last) return;
  variant.kernels[static_cast<size_t>(n - 1)](w, first, last, x_rows, y_rows);
}

}  // namespace nvfp4lm::cpu
