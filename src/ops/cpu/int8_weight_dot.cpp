// See int8_weight_dot.h. A row's values use the activations' chunk layout (ops/cpu/nvfp4_int8_dot.h): per chunk of
// 128, the 64 even elements then the 64 odd ones, so int32 lane L of a chunk's two vpdpbusd holds half of block L/2.
// Per pair of chunks the 32 lanes become 16 block sums D_b, then acc_b += D_b · (t_b · scale_b) with scale_b the
// activations' 128·s_b; the row's result is Σ_b acc_b / 128.
#include "ops/cpu/int8_weight_dot.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/numeric.h"
#include "ops/cpu/arm/kernels.h"
#include "ops/cpu/x86/kernels.h"

namespace nvfp4lm::cpu {
namespace {

// t as a BF16 no smaller than t (t >= 0 and finite): so that |w| / t_b <= 127 for the block's largest |w|.
uint16_t bf16_round_up(float t) {
  uint16_t bits = float_to_bf16(t);
  if (bf16_to_float(bits) < t) ++bits;
  return bits;
}

// ---- scalar ---------------------------------------------------------------------------------------------------
template <int N>
void int8_weight_rows_scalar(const Int8Weights& w, int64_t first, int64_t last, const Int8Activations* const* x,
                             float* const* y) {
  const int64_t pairs = w.padded_cols / kInt8Padding, blocks_per_row = w.padded_cols / kNvfp4Block;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* values = w.values.data() + o * w.padded_cols;
    const uint16_t* scales = w.scales.data() + o * blocks_per_row;
    float acc[N][kInt8BlocksPerPair] = {};
    for (int64_t p = 0; p < pairs; ++p)
      for (int j = 0; j < kInt8BlocksPerPair; ++j) {
        const int64_t chunk = 2 * p + j / 8, block = p * kInt8BlocksPerPair + j, first_lane = 2 * (j % 8);
        const uint8_t* v = values + chunk * kInt8Chunk;
        const float t = bf16_to_float(scales[block]);
        for (int r = 0; r < N; ++r) {
          const int8_t* q = x[r]->q.data() + chunk * kInt8Chunk;
          const int32_t* bias = x[r]->int8_weight_bias.data() + chunk * kInt8ChunkLanes;
          int32_t d = bias[first_lane] + bias[first_lane + 1];
          for (int64_t i = 4 * first_lane; i < 4 * first_lane + 8; ++i) d += v[i] * q[i] + v[64 + i] * q[64 + i];
          acc[r][j] = std::fma(static_cast<float>(d), t * x[r]->scale[static_cast<size_t>(block)], acc[r][j]);
        }
      }
    for (int r = 0; r < N; ++r) {
      float sum = 0.f;
      for (float block_sum : acc[r]) sum += block_sum;
      y[r][o] = sum * kInt8WeightUnscale;
    }
  }
}

std::vector<Int8WeightDotFamily::Variant> int8_weight_dot_variants() {
  std::vector<Int8WeightDotFamily::Variant> variants;  // fastest first
#if NVFP4LM_X86_INTRINSICS
  variants.push_back({&kAvx512VnniIsa, x86::int8_weight_dot_avx512vnni()});
  variants.push_back({&kAvx2Isa, x86::int8_weight_dot_avx2()});
#endif
#if NVFP4LM_ARM_INTRINSICS
  variants.push_back({&kNeonDotIsa, arm::int8_weight_dot_dotprod()});
  variants.push_back({&kNeonIsa, arm::int8_weight_dot_neon()});
#endif
  variants.push_back({&kScalarIsa, row_kernels<Int8WeightDotFn>([]<int N>() { return &int8_weight_rows_scalar<N>; })});
  return variants;
}

}  // namespace

const Int8WeightDotFamily& int8_weight_dot_family() {
  static const Int8WeightDotFamily family("int8 weight dot", int8_weight_dot_variants());
  return family;
}

Int8Weights quantize_int8_weights(const void* data, bool bf16, int64_t rows, int64_t cols, int64_t ld) {
  NVFP4LM_ASSERT(cols % kNvfp4Block == 0 && ld >= cols,
                 "quantize_int8_weights: {} columns (stride {}), not whole blocks", cols, ld);
  Int8Weights w;
  w.rows = rows;
  w.cols = cols;
  w.padded_cols = int8_padded_cols(cols);
  w.values.assign(static_cast<size_t>(rows * w.padded_cols), 128);
  w.scales.assign(static_cast<size_t>(rows * (w.padded_cols / kNvfp4Block)), 0);
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < rows; ++o) {
    uint8_t* values = w.values.data() + o * w.padded_cols;
    for (int64_t b = 0; b < cols / kNvfp4Block; ++b) {
      float block[kNvfp4Block];
      float max_abs = 0.0f;
      bool finite = true;
      for (int i = 0; i < kNvfp4Block; ++i) {
        const int64_t at = o * ld + b * kNvfp4Block + i;
        block[i] = bf16 ? bf16_to_float(static_cast<const uint16_t*>(data)[at]) : static_cast<const float*>(data)[at];
        finite = finite && std::isfinite(block[i]);
        max_abs = std::max(max_abs, std::abs(block[i]));
      }
      // A non-finite block keeps u = 0 and a NaN scale, so its outputs are NaN, as the BF16 product's would be.
      const uint16_t scale = !finite ? uint16_t{0x7FC0} : bf16_round_up(max_abs / 127.0f);
      w.scales[static_cast<size_t>(o * (w.padded_cols / kNvfp4Block) + b)] = scale;
      const float t = bf16_to_float(scale);
      if (!finite || t == 0.0f) continue;
      for (int i = 0; i < kNvfp4Block; ++i) {
        const float u = std::clamp(std::nearbyint(block[i] / t), -127.0f, 127.0f);
        values[int8_position(b * kNvfp4Block + i)] = static_cast<uint8_t>(u + 128.0f);
      }
    }
  }
  return w;
}

void int8_weight_dot_rows(const Int8WeightDotFamily::Variant& variant, const Int8Weights& w, int64_t first,
                          int64_t last, const Int8Activations* const* x_rows, float* const* y_rows, int n) {
  NVFP4LM_ASSERT(n >= 1 && n <= kDotMaxRows, "int8_weight_dot_rows: {} activation rows (1..{})", n, kDotMaxRows);
  int8_weight_dot_family().check_runnable(variant);
  NVFP4LM_ASSERT(first >= 0 && last <= w.rows, "int8_weight_dot_rows: rows [{}, {}) of {}", first, last, w.rows);
  for (int r = 0; r < n; ++r)
    NVFP4LM_ASSERT(x_rows[r]->cols == w.cols, "int8_weight_dot_rows: activations of {} columns for a weight of {}",
                   x_rows[r]->cols, w.cols);
  if (first >= last) return;
  variant.kernels[static_cast<size_t>(n - 1)](w, first, last, x_rows, y_rows);
}

}  // namespace nvfp4lm::cpu
