// See nvfp4_int8_dot.h. One chunk is 64 code bytes = 128 weights = 8 blocks. As 16 int32 lanes: lane L sums the
// weights of code bytes 4L..4L+3 (elements 8L..8L+7, half of block L/2): their low nibbles times activations
// q[4L..4L+3] of the reordered chunk, their high nibbles times q[64+4L..64+4L+3]. In integers,
//   D_L = bias_L + Σ (2·e2m1(c) + 12)·q = Σ 2·e2m1(c)·q,   D_b = D_2b + D_2b+1 (the block's two lanes),
// and then, in fp32, acc_b += D_b · (m_b · scale_b), where m_b = e4m3(scale byte) / 256 is what vcvtph2ps makes of
// the byte's 7 low bits placed in an fp16 (an E4M3 is an fp16 with one exponent bit fewer: the same value times
// 2^-8 for every byte, subnormals included) and scale_b = 128·s_b. The row's result is
// tensor_scale · Σ_b acc_b = tensor_scale / 2 · Σ_b e4m3_b · s_b · D_b.
#include "ops/cpu/nvfp4_int8_dot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "ops/cpu/arm/kernels.h"
#include "ops/cpu/x86/kernels.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::cpu {
namespace {

constexpr float kScaleFactor = 128.0f;  // scale_b = 128·s_b: 2^8 undoes m_b's 2^-8, 1/2 undoes the doubled codes

// ---- scalar: the lanes above, one at a time ----------------------------------------------------------------
template <int N>
void int8_dot_rows_scalar(const Nvfp4Rows& w, int64_t first, int64_t last, const Int8Activations* const* x,
                          float* const* y) {
  const std::array<int8_t, 16> table = int8_weight_table();
  const int64_t row_bytes = w.cols / 2, blocks = w.cols / kNvfp4Block;
  const int64_t chunks = (w.cols + kInt8Chunk - 1) / kInt8Chunk;
  for (int64_t o = first; o < last; ++o) {
    const uint8_t* codes = w.codes + o * row_bytes;
    const uint8_t* scales = w.scales + o * blocks;
    float acc[N][2 * kInt8BlocksPerChunk] = {};  // one sum per block of a pair of chunks
    for (int64_t c = 0; c < chunks; ++c) {
      for (int lane = 0; lane < kInt8ChunkLanes; lane += 2) {  // a block's two lanes together
        const int64_t block = c * kInt8BlocksPerChunk + lane / 2;
        const float m = block < blocks ? e4m3_to_float(scales[block]) / 256.0f : 0.0f;
        for (int r = 0; r < N; ++r) {
          const int8_t* q = x[r]->q.data() + c * kInt8Chunk;
          int32_t d = x[r]->bias[static_cast<size_t>(c * kInt8ChunkLanes + lane)] +
                      x[r]->bias[static_cast<size_t>(c * kInt8ChunkLanes + lane + 1)];
          for (int pair_lane = lane; pair_lane < lane + 2; ++pair_lane)
            for (int k = 0; k < 4; ++k) {
              const int64_t byte = c * kInt8ChunkCodeBytes + 4 * pair_lane + k;
              const uint8_t code = byte < row_bytes ? codes[byte] : 0;  // zero past the row's end
              d += table[code & 0xF] * q[4 * pair_lane + k] + table[code >> 4] * q[64 + 4 * pair_lane + k];
            }
          float& sum = acc[r][block % (2 * kInt8BlocksPerChunk)];
          sum = std::fma(static_cast<float>(d), m * x[r]->scale[static_cast<size_t>(block)], sum);
        }
      }
    }
    for (int r = 0; r < N; ++r) {
      float sum = 0.f;
      for (float block_sum : acc[r]) sum += block_sum;
      y[r][o] = w.tensor_scale * sum;
    }
  }
}

std::vector<Int8DotFamily::Variant> nvfp4_int8_dot_variants() {
  std::vector<Int8DotFamily::Variant> variants;  // fastest first
#if NVFP4LM_X86_INTRINSICS
  variants.push_back({&kAvx512VnniIsa, x86::nvfp4_int8_dot_avx512vnni()});
  variants.push_back({&kAvx2Isa, x86::nvfp4_int8_dot_avx2()});
#endif
#if NVFP4LM_ARM_INTRINSICS
  variants.push_back({&kNeonDotIsa, arm::nvfp4_int8_dot_dotprod()});
  variants.push_back({&kNeonIsa, arm::nvfp4_int8_dot_neon()});
#endif
  variants.push_back({&kScalarIsa, row_kernels<Int8DotFn>([]<int N>() { return &int8_dot_rows_scalar<N>; })});
  return variants;
}

}  // namespace

const Int8DotFamily& nvfp4_int8_dot_family() {
  static const Int8DotFamily family("nvfp4 int8 dot", nvfp4_int8_dot_variants());
  return family;
}

// 2·e2m1(code) + 12 for the 16 codes: 0, 1, 2, 3, 4, 6, 8, 12 and their negatives (code 8 is -0).
std::array<int8_t, 16> int8_weight_table() {
  std::array<int8_t, 16> table{};
  for (int c = 0; c < 16; ++c)
    table[static_cast<size_t>(c)] =
        static_cast<int8_t>(std::lround(2.0f * e2m1_to_float(static_cast<uint8_t>(c))) + kInt8WeightOffset);
  return table;
}

std::array<int8_t, 64> int8_weight_table_x4() {
  const std::array<int8_t, 16> table = int8_weight_table();
  std::array<int8_t, 64> tables{};
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = table[i % 16];
  return tables;
}

float quantize_int8_block(const float* x, int8_t* q) {
  float max_abs = 0.0f;
  bool finite = true;
  for (int i = 0; i < kNvfp4Block; ++i) {
    finite = finite && std::isfinite(x[i]);
    max_abs = std::max(max_abs, std::abs(x[i]));
  }
  if (!finite || max_abs == 0.0f) {
    std::fill(q, q + kNvfp4Block, int8_t{0});
    return (!finite ? NAN : 0.0f);
  }
  const float inverse = 127.0f / max_abs;
  for (int i = 0; i < kNvfp4Block; ++i)
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inverse), -127.0f, 127.0f));
  return max_abs / 127.0f * kScaleFactor;
}

void quantize_int8_activations(const float* x, int64_t cols, Int8Activations& out) {
  NVFP4LM_ASSERT(cols % kNvfp4Block == 0, "quantize_int8_activations: {} columns is not a multiple of {}", cols,
                 kNvfp4Block);
  const int64_t padded = int8_padded_cols(cols);
  out.cols = cols;
  out.q.assign(static_cast<size_t>(padded), 0);
  out.bias.assign(static_cast<size_t>(padded / 8), 0);
  out.int8_weight_bias.assign(static_cast<size_t>(padded / 8), 0);
  out.scale.assign(static_cast<size_t>(padded / kNvfp4Block), 0.0f);
  for (int64_t b = 0; b < cols / kNvfp4Block; ++b) {
    int8_t block[kNvfp4Block];
    out.scale[static_cast<size_t>(b)] = quantize_int8_block(x + b * kNvfp4Block, block);
    for (int i = 0; i < kNvfp4Block; ++i) out.q[static_cast<size_t>(int8_position(b * kNvfp4Block + i))] = block[i];
    const int64_t chunk = b / kInt8BlocksPerChunk, first_lane = 2 * (b % kInt8BlocksPerChunk);
    const int8_t* q = out.q.data() + chunk * kInt8Chunk;
    for (int64_t lane = first_lane; lane < first_lane + 2; ++lane) {
      int32_t sum = 0;
      for (int k = 0; k < 4; ++k) sum += q[4 * lane + k] + q[64 + 4 * lane + k];
      out.bias[static_cast<size_t>(chunk * kInt8ChunkLanes + lane)] = -kInt8WeightOffset * sum;
      out.int8_weight_bias[static_cast<size_t>(chunk * kInt8ChunkLanes + lane)] = -128 * sum;
    }
  }
}

void nvfp4_int8_dot_rows(const Int8DotFamily::Variant& variant, const Nvfp4Rows& w, int64_t first, int64_t last,
                         const Int8Activations* const* x_rows, float* const* y_rows, int n) {
  NVFP4LM_ASSERT(n >= 1 && n <= kDotMaxRows, "nvfp4_int8_dot_rows: {} activation rows (1..{})", n, kDotMaxRows);
  NVFP4LM_ASSERT(w.cols % kNvfp4Block == 0, "nvfp4_int8_dot_rows: {} columns is not a multiple of {}", w.cols,
                 kNvfp4Block);
  nvfp4_int8_dot_family().check_runnable(variant);
  for (int r = 0; r < n; ++r)
    NVFP4LM_ASSERT(x_rows[r]->cols == w.cols, "nvfp4_int8_dot_rows: activations of {} columns for a weight of {}",
                   x_rows[r]->cols, w.cols);
  if (first >= last) return;
  variant.kernels[static_cast<size_t>(n - 1)](w, first, last, x_rows, y_rows);
}

}  // namespace nvfp4lm::cpu
