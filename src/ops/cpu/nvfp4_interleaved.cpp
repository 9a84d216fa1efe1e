// See nvfp4_interleaved.h. Per group and block, int32 lane r of the integer sum is row r:
//   D_r = bias_b + Σ_{bytes k of row r} (2·e2m1(low nibble) + 12)·q_low + (2·e2m1(high nibble) + 12)·q_high
// with the block's activations in Int8BlockActivations order, so the lane's 4 bytes meet 4 broadcast activations.
#include "ops/cpu/nvfp4_interleaved.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "ops/cpu/arm/kernels.h"
#include "ops/cpu/nvfp4_int8_dot.h"
#include "ops/cpu/x86/kernels.h"
#include "quant/e4m3.h"

namespace nvfp4lm::cpu {
namespace {

// Where element i (0..15) of a block sits in Int8BlockActivations order.
constexpr int block_position(int i) { return i / 8 * 8 + (i % 2) * 4 + i % 8 / 2; }

// ---- scalar -----------------------------------------------------------------------------------------------------
template <int N>
void groups_scalar(const Nvfp4Interleaved& w, int64_t first, int64_t last, const Int8BlockActivations* const* x,
                   float* const* y) {
  const std::array<int8_t, 16> table = int8_weight_table();
  const int64_t blocks = w.cols / kNvfp4Block;
  for (int64_t g = first; g < last; ++g) {
    float acc[N][2][kInterleaveRows] = {};  // two partial sums (even and odd blocks), as the AVX-512 kernel
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = interleaved_block_at(w, g, b);
      for (int64_t row = 0; row < kInterleaveRows; ++row) {
        const float m = e4m3_to_float(block[2 * kInterleavedHalfBytes + row]) / 256.0f;
        for (int r = 0; r < N; ++r) {
          const int8_t* q = x[r]->q.data() + b * kNvfp4Block;
          int32_t d = x[r]->bias[static_cast<size_t>(b)];
          for (int half = 0; half < 2; ++half)
            for (int k = 0; k < 4; ++k) {
              const uint8_t code = block[half * kInterleavedHalfBytes + 4 * row + k];
              d += table[code & 0xF] * q[8 * half + k] + table[code >> 4] * q[8 * half + 4 + k];
            }
          float& sum = acc[r][b % 2][row];
          sum = std::fma(static_cast<float>(d), m * x[r]->scale[static_cast<size_t>(b)], sum);
        }
      }
    }
    for (int r = 0; r < N; ++r)
      for (int64_t row = 0; row < kInterleaveRows && g * kInterleaveRows + row < w.rows; ++row)
        y[r][g * kInterleaveRows + row] = (acc[r][0][row] + acc[r][1][row]) * w.tensor_scale;
  }
}

std::vector<InterleavedDotFamily::Variant> nvfp4_interleaved_variants() {
  std::vector<InterleavedDotFamily::Variant> variants;  // fastest first
#if NVFP4LM_X86_INTRINSICS
  variants.push_back({&kAvx512VnniIsa, x86::nvfp4_interleaved_avx512vnni()});
#endif
#if NVFP4LM_ARM_INTRINSICS
  variants.push_back({&kNeonI8mmIsa, arm::nvfp4_interleaved_i8mm()});
  variants.push_back({&kNeonDotIsa, arm::nvfp4_interleaved_dotprod()});
  variants.push_back({&kNeonIsa, arm::nvfp4_interleaved_neon()});
#endif
  variants.push_back({&kScalarIsa, row_kernels<InterleavedDotFn>([]<int N>() { return &groups_scalar<N>; })});
  return variants;
}

}  // namespace

const InterleavedDotFamily& nvfp4_interleaved_family() {
  static const InterleavedDotFamily family("nvfp4 interleaved int8 dot", nvfp4_interleaved_variants());
  return family;
}

int64_t interleaved_groups(int64_t rows) { return (rows + kInterleaveRows - 1) / kInterleaveRows; }

int64_t interleaved_nvfp4_bytes(int64_t rows, int64_t cols) {
  return interleaved_groups(rows) * (cols / kNvfp4Block) * kInterleavedBlockBytes;
}

void interleave_nvfp4(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, uint8_t* out) {
  NVFP4LM_ASSERT(cols % kNvfp4Block == 0 && rows >= 0, "interleave_nvfp4: [{}, {}] (columns must be a multiple of 16)",
                 rows, cols);
  const int64_t blocks = cols / kNvfp4Block, groups = interleaved_groups(rows);
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g) {
    uint8_t* group = out + g * blocks * kInterleavedBlockBytes;
    std::memset(group, 0, static_cast<size_t>(blocks * kInterleavedBlockBytes));  // padding rows: zero codes, scales
    for (int64_t row = 0; row < kInterleaveRows && g * kInterleaveRows + row < rows; ++row) {
      const int64_t o = g * kInterleaveRows + row;
      for (int64_t b = 0; b < blocks; ++b) {
        uint8_t* block = group + b * kInterleavedBlockBytes;
        std::memcpy(block + 4 * row, codes + o * (cols / 2) + b * 8, 4);
        std::memcpy(block + kInterleavedHalfBytes + 4 * row, codes + o * (cols / 2) + b * 8 + 4, 4);
        block[2 * kInterleavedHalfBytes + row] = scales[o * blocks + b];
      }
    }
  }
}

void deinterleave_nvfp4_group(const uint8_t* weight, int64_t cols, int64_t group, int64_t count, uint8_t* codes,
                              uint8_t* scales) {
  NVFP4LM_ASSERT(count >= 0 && count <= kInterleaveRows, "deinterleave_nvfp4_group: {} rows", count);
  const int64_t blocks = cols / kNvfp4Block;
  const uint8_t* first = weight + group * blocks * kInterleavedBlockBytes;
  for (int64_t row = 0; row < count; ++row)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = first + b * kInterleavedBlockBytes;
      std::memcpy(codes + row * (cols / 2) + b * 8, block + 4 * row, 4);
      std::memcpy(codes + row * (cols / 2) + b * 8 + 4, block + kInterleavedHalfBytes + 4 * row, 4);
      scales[row * blocks + b] = block[2 * kInterleavedHalfBytes + row];
    }
}

void quantize_int8_blocks(const float* x, int64_t cols, Int8BlockActivations& out) {
  NVFP4LM_ASSERT(cols % kNvfp4Block == 0, "quantize_int8_blocks: {} columns is not a multiple of {}", cols,
                 kNvfp4Block);
  out.cols = cols;
  out.q.resize(static_cast<size_t>(cols));
  out.bias.resize(static_cast<size_t>(cols / kNvfp4Block));
  out.scale.resize(static_cast<size_t>(cols / kNvfp4Block));
  for (int64_t b = 0; b < cols / kNvfp4Block; ++b) {
    int8_t block[kNvfp4Block];
    out.scale[static_cast<size_t>(b)] = quantize_int8_block(x + b * kNvfp4Block, block);
    int32_t sum = 0;
    for (int i = 0; i < kNvfp4Block; ++i) {
      out.q[static_cast<size_t>(b * kNvfp4Block + block_position(i))] = block[i];
      sum += block[i];
    }
    out.bias[static_cast<size_t>(b)] = -kInt8WeightOffset * sum;
  }
}

void nvfp4_interleaved_int8_dot(const InterleavedDotFamily::Variant& variant, const Nvfp4Interleaved& w,
                                int64_t first_group, int64_t last_group, const Int8BlockActivations* const* x_rows,
                                float* const* y_rows, int n) {
  NVFP4LM_ASSERT(n >= 1 && n <= kDotMaxRows, "nvfp4_interleaved_int8_dot: {} activation rows (1..{})", n, kDotMaxRows);
  nvfp4_interleaved_family().check_runnable(variant);
  NVFP4LM_ASSERT(first_group >= 0 && first_group <= last_group && last_group <= interleaved_groups(w.rows),
                 "nvfp4_interleaved_int8_dot: groups [{}, {}) of {}", first_group, last_group,
                 interleaved_groups(w.rows));
  for (int r = 0; r < n; ++r)
    NVFP4LM_ASSERT(x_rows[r]->cols == w.cols, "nvfp4_interleaved_int8_dot: activation row {} has {} columns, not {}", r,
                   x_rows[r]->cols, w.cols);
  variant.kernels[static_cast<size_t>(n - 1)](w, first_group, last_group, x_rows, y_rows);
}

}  // namespace nvfp4lm::cpu
