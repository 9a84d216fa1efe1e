// See nvfp4_dot.h. The portable variant and the family's table; the x86 variants (ops/cpu/x86/nvfp4_dot.cpp) run the
// same loop nest: per weight row, per 16-element block, decode the 16 codes to
// floats, multiply by the block multiplier, and fused-multiply-add against each of the n activation rows (n is a
// template parameter so the n accumulators live in registers).
#include "ops/cpu/nvfp4_dot.h"

#include <array>
#include <vector>

#include "core/error.h"
#include "ops/cpu/x86/kernels.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::cpu {
namespace {

// ---- scalar: table lookups, 16 fixed lanes per row (the compiler vectorizes the lane loop) ----------------------
template <int N>
void nvfp4_dot_rows_scalar(const Nvfp4Rows& w, int64_t first, int64_t last, const float* const* x, float* const* y) {
  const std::array<float, 256> multiplier = nvfp4_multiplier_table(w.tensor_scale);
  const std::array<float, 16> values = e2m1_value_table();
  const int64_t blocks = w.cols / kNvfp4Block;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * (w.cols / 2);
    const uint8_t* scales = w.scales + o * blocks;
    float lanes[N][kNvfp4Block] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      const float m = multiplier[scales[b]];
      float weight[kNvfp4Block];
      for (int i = 0; i < kNvfp4Block / 2; ++i) {
        const uint8_t byte = codes[b * (kNvfp4Block / 2) + i];
        weight[2 * i] = values[byte & 0xF] * m;
        weight[2 * i + 1] = values[byte >> 4] * m;
      }
      for (int r = 0; r < N; ++r) {
        const float* xb = x[r] + b * kNvfp4Block;
        for (int i = 0; i < kNvfp4Block; ++i) lanes[r][i] += weight[i] * xb[i];
      }
    }
    for (int r = 0; r < N; ++r) {
      float sum = 0.f;
      for (float lane : lanes[r]) sum += lane;
      y[r][o] = sum;
    }
  }
}

std::vector<Nvfp4DotFamily::Variant> nvfp4_dot_variants() {
  std::vector<Nvfp4DotFamily::Variant> variants;  // fastest first
#if NVFP4LM_X86_INTRINSICS
  variants.push_back({&kAvx512FIsa, x86::nvfp4_dot_avx512()});
  variants.push_back({&kAvx2Isa, x86::nvfp4_dot_avx2()});
#endif
  variants.push_back({&kScalarIsa, row_kernels<Nvfp4DotFn>([]<int N>() { return &nvfp4_dot_rows_scalar<N>; })});
  return variants;
}

}  // namespace

std::array<float, 256> nvfp4_multiplier_table(float tensor_scale) {
  std::array<float, 256> table{};
  for (int s = 0; s < 256; ++s)
    table[static_cast<size_t>(s)] = nvfp4_dequant_scale(static_cast<uint8_t>(s), tensor_scale);
  return table;
}

std::array<float, 16> e2m1_value_table() {
  std::array<float, 16> table{};
  for (int c = 0; c < 16; ++c) table[static_cast<size_t>(c)] = e2m1_to_float(static_cast<uint8_t>(c));
  return table;
}

const Nvfp4DotFamily& nvfp4_dot_family() {
  static const Nvfp4DotFamily family("nvfp4 dot", nvfp4_dot_variants());
  return family;
}

void nvfp4_dot_rows(const Nvfp4DotFamily::Variant& variant, const Nvfp4Rows& w, int64_t first, int64_t last,
                    const float* const* x_rows, float* const* y_rows, int n) {
  NVFP4LM_ASSERT(n >= 1 && n <= kDotMaxRows, "nvfp4_dot_rows: {} activation rows (1..{})", n, kDotMaxRows);
  NVFP4LM_ASSERT(w.cols % kNvfp4Block == 0, "nvfp4_dot_rows: {} columns is not a multiple of {}", w.cols, kNvfp4Block);
  nvfp4_dot_family().check_runnable(variant);
  if (first >= last) return;
  variant.kernels[static_cast<size_t>(n - 1)](w, first, last, x_rows, y_rows);
}

}  // namespace nvfp4lm::cpu
