// Dot products of a few activation rows with packed NVFP4 weight rows in integer arithmetic: the CPU decode step's
// NVFP4 projections under CpuMatmul::Int8Activations (ops/cpu_matmul.h), the way llama.cpp runs Q4_0 x Q8_0.
//
// Why: the fp32 kernel (ops/cpu/nvfp4_dot.h) widens every 4-bit code to an fp32 lane before its FMA, so a core
// retires 16 multiply-adds per vector instruction and decode is bound by arithmetic, not memory (bench/NOTES.md).
// Twice an E2M1 value is an integer in [-12, 12], so a byte shuffle turns 64 codes into 64 int8 weights and one
// vpdpbusd (AVX-512 VNNI) multiplies them by 64 int8 activations: 4x the work per instruction.
//
// Numerics. Each activation row is quantized once per call, per 16-element block b (the weight's block size):
// s_b = max|x| / 127 and q = round_half_even(x * (127 / max|x|)) in [-127, 127] (int8 activations, the Q8 scheme
// of llama.cpp with blocks of 16). Then, exactly in integers, D_b = Σ_{i in b} 2·e2m1(c_i)·q_i, and
//   y = tensor_scale / 2 · Σ_b e4m3(scale_b) · s_b · D_b
// with fp32 products and sums (order fixed per variant). Against x · deq(w)ᵀ the only change is the activations'
// rounding, |x_i - s_b q_i| <= s_b / 2 = max_b|x| / 254, so
//   |y - y_ref| <= Σ_b |e4m3(scale_b) · tensor_scale| · (max_b|x| / 254) · Σ_{i in b} |e2m1(c_i)|  (+ fp32 sums),
// the bound the tests check. Weight codes are unsigned in the kernel (2·e2m1 + 12, so vpdpbusd's u8 x s8 applies);
// the activation side carries the correction -12·Σq per lane, so the integer sums are exact.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ops/cpu/nvfp4_dot.h"
#include "ops/cpu/views.h"

namespace nvfp4lm::cpu {

// Elements of one chunk: 64 code bytes (128 weights, 8 blocks), one vector load. Rows are padded to whole pairs of
// chunks (256 elements, 16 blocks: the AVX-512 kernel's step).
inline constexpr int64_t kInt8Chunk = 128;
inline constexpr int64_t kInt8Padding = 2 * kInt8Chunk;
// A chunk's sums as int32 lanes: lane L adds the products of code bytes 4L..4L+3 (half of block L / 2).
inline constexpr int kInt8ChunkLanes = 16;
inline constexpr int kInt8ChunkCodeBytes = 64;
inline constexpr int kInt8BlocksPerChunk = 8;

// cols rounded up to whole pairs of chunks: the length of a quantized row (and of an int8 weight row).
constexpr int64_t int8_padded_cols(int64_t cols) { return (cols + kInt8Padding - 1) / kInt8Padding * kInt8Padding; }
// Where element k of a row is stored in that layout: its chunk, then even elements before odd ones.
constexpr int64_t int8_position(int64_t k) {
  return k / kInt8Chunk * kInt8Chunk + (k % kInt8Chunk % 2) * 64 + k % kInt8Chunk / 2;
}

// The weight side of the integer products (this kernel's and ops/cpu/nvfp4_interleaved.h's): code c as
// 2·e2m1(c) + kInt8WeightOffset in [0, 24], vpdpbusd's unsigned operand; the activations carry
// -kInt8WeightOffset · Σq so the sums stay exact.
inline constexpr int kInt8WeightOffset = 12;
std::array<int8_t, 16> int8_weight_table();     // indexed by the 4-bit code
std::array<int8_t, 64> int8_weight_table_x4();  // repeated 4 times: vpermb reads 6 index bits, so no nibble mask

// One activation row quantized for nvfp4_int8_dot_rows, zero-padded to a multiple of kInt8Padding. Within each chunk
// the int8 values are reordered to the codes' nibble order: the 64 even elements (low nibbles), then the 64 odd ones
// (high nibbles), so a vector of low or high nibbles multiplies a contiguous vector of activations.
struct Int8Activations {
  int64_t cols = 0;
  std::vector<int8_t> q;      // [padded cols], the order above
  std::vector<int32_t> bias;  // [padded cols / 8]: -12 x the sum of the 8 q's that meet int32 lane L of a chunk
  std::vector<int32_t> int8_weight_bias;  // the same lanes, -128 x the sum (ops/cpu/int8_weight_dot.h)
  std::vector<float> scale;               // [padded cols / 16]: 128 · s_b per block b (see the .cpp)
};

// One block of 16 activations rounded as above: q[0, 16) in the block's own order, and the returned 128 · s_b (the
// factor the kernels apply; NaN when a value is not finite, with q all 0). Every int8 activation layout uses it.
float quantize_int8_block(const float* x, int8_t* q);
// Quantizes x[0, cols) (cols a multiple of 16) into `out` (reusing its storage). A block whose values are not all
// finite gets s_b = NaN, so non-finite activations still give non-finite outputs.
void quantize_int8_activations(const float* x, int64_t cols, Int8Activations& out);
// Every row of x quantized by `quantize` (one int8 layout's quantizer), into the calling thread's buffers of that
// layout (reused across calls). A parallel region must read them through the returned reference: naming a
// thread_local there would give each worker its own, empty one.
template <typename Quantized>
const std::vector<Quantized>& quantize_rows_per_thread(const MatrixF32& x,
                                                       void (*quantize)(const float*, int64_t, Quantized&)) {
  static thread_local std::vector<Quantized> storage;
  if (storage.size() < static_cast<size_t>(x.rows)) storage.resize(static_cast<size_t>(x.rows));
  for (int64_t r = 0; r < x.rows; ++r) quantize(x.row(r), x.cols, storage[static_cast<size_t>(r)]);
  return storage;
}
inline const std::vector<Int8Activations>& quantize_int8_rows(const MatrixF32& x) {
  return quantize_rows_per_thread(x, quantize_int8_activations);
}

using Int8DotFn = void (*)(const Nvfp4Rows&, int64_t, int64_t, const Int8Activations* const*, float* const*);
using Int8DotFamily = KernelFamily<RowKernels<Int8DotFn>>;
const Int8DotFamily& nvfp4_int8_dot_family();  // avx512vnni+vbmi, avx2+fma, neon+dotprod, neon, scalar

// y_rows[r][o] = the formula above for weight rows o in [first, last) and the r-th quantized row (r < n <= 8),
// whose cols must equal w.cols.
void nvfp4_int8_dot_rows(const Int8DotFamily::Variant& variant, const Nvfp4Rows& w, int64_t first, int64_t last,
                         const Int8Activations* const* x_rows, float* const* y_rows, int n);

}  // namespace nvfp4lm::cpu
