// Fused NVFP4 W4A16 GEMV / skinny GEMM ("cuda/nvfp4-w4a16", see nvfp4_linear.h): y = x · deq(w)ᵀ for N <= 8
// rows of x, memory bound on the packed weight.
//
// Work split: a CTA of 4 warps owns 16 output features (one mma row tile); its warps split the input dimension
// in chunks of 128 inputs (warp w takes chunks w, w + 4, ...), loading 4 chunks ahead, and meet in shared
// memory at the end. Within a warp, lane (g, c) = (lane / 4, lane % 4) reads, per chunk, 16 bytes of codes (32
// inputs: 128 * chunk + 32 c ..) of weight rows g and g + 8, their two scale bytes, and x row g (the mma's
// column g, zeros for g >= N) at the same 32 inputs — so every 16-byte load is coalesced per quad and the
// tensor-core fragments need no shuffles: the k order inside each mma is permuted identically for A and B.
//
// Decoding (per 32-bit word of 8 codes, n0 in the low nibble): BF16 with bits sign << 15 | magnitude << 6 is
// exactly e2m1 * 2^-126 (code 1, i.e. 0.5, becomes the BF16 subnormal 2^-127); words are paired as (n3, n7),
// (n2, n6), (n1, n5), (n0, n4) by shifting the word 4 bits at a time (Marlin's trick). One HMUL2 by the block
// scale taken as BF16(e4m3 * 2^116) makes the fragment code * e4m3 * 2^-10 — exact (2 + 4 significant bits), a
// normal BF16 — and the fp32 result is multiplied by tensor_scale * 2^10 at the end. The x fragments are the
// same permutation of x's 8 BF16 values (byte permutes).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "ops/cuda/nvfp4_linear.h"
#include "ops/cuda/ptx.h"

namespace nvfp4lm::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16;               // output features per CTA
constexpr int kChunkInputs = 128;       // inputs per warp chunk (4 lanes x 32)
constexpr int kAhead = 4;               // chunks loaded before they are used
constexpr int kMaxRows = 8;             // rows of x: the mma's 8 columns
constexpr float kScaleBias = 0x1p116f;  // block scales are taken as e4m3 * 2^116 ...
constexpr float kResultBias = 0x1p10f;  // ... so products come out as value * 2^-10

struct Chunk {
  uint4 codes[2];      // weight rows g and g + 8, 32 codes each
  uint32_t scales[2];  // their two scale bytes (blocks 2 chunk_lane, 2 chunk_lane + 1)
  uint4 x[4];          // x row g, inputs 8w .. 8w + 7 of the lane's 32
};

__device__ __forceinline__ uint32_t permute(uint32_t low_word, uint32_t high_word, uint32_t selector) {
  return __byte_perm(low_word, high_word, selector);
}

// Codes of nibbles 3 and 7 of `word` (after a left shift by 4 j, nibbles 3 - j and 7 - j) as BF16x2 * 2^-126.
__device__ __forceinline__ uint32_t decode_pair(uint32_t word) {
  return (word & 0x80008000u) | ((word >> 6) & 0x01C001C0u);
}

// Two E4M3 scale bytes (low byte first) -> BF16x2 pairs (s, s) * 2^116 for each.
__device__ __forceinline__ void decode_scales(uint32_t bytes, uint32_t (&pairs)[2]) {
  const __half2_raw halves = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(bytes), __NV_E4M3);
  const float low = __half2float(__ushort_as_half(halves.x)) * kScaleBias;
  const float high = __half2float(__ushort_as_half(halves.y)) * kScaleBias;
  const __nv_bfloat162 a = __floats2bfloat162_rn(low, low), b = __floats2bfloat162_rn(high, high);
  pairs[0] = *reinterpret_cast<const uint32_t*>(&a);
  pairs[1] = *reinterpret_cast<const uint32_t*>(&b);
}

__device__ __forceinline__ uint32_t scale_pair(uint32_t codes, uint32_t scale) {
  const __nv_bfloat162 product =
      __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&codes), *reinterpret_cast<const __nv_bfloat162*>(&scale));
  return *reinterpret_cast<const uint32_t*>(&product);
}

struct GemvParams {
  const uint16_t* x;
  const uint8_t* codes;
  const uint8_t* scales;
  uint16_t* y;
  int64_t x_stride, y_stride, out;
  int in, n_rows, chunks;
  float result_scale;  // tensor_scale * 2^10
};

__global__ void __launch_bounds__(kThreads) nvfp4_gemv_kernel(GemvParams p) {
  NVFP4LM_SHARED(float[kWarps][kRows][kMaxRows], partial);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t rows[2] = {row0 + g, row0 + g + 8};
  const bool row_valid[2] = {rows[0] < p.out, rows[1] < p.out};
  const bool x_valid = g < p.n_rows;
  const int64_t code_stride = p.in / 2, scale_stride = p.in / 16;

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int first = warp; first < p.chunks; first += kWarps * kAhead) {
    Chunk chunk[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int input = (first + u * kWarps) * kChunkInputs + 32 * c;
      const bool valid = first + u * kWarps < p.chunks && input < p.in;  // in % 32 == 0: all 32 or none
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const bool load = valid && row_valid[r];
        chunk[u].codes[r] = load ? load_streaming(p.codes + rows[r] * code_stride + input / 2) : make_uint4(0, 0, 0, 0);
        chunk[u].scales[r] =
            load ? __ldg(reinterpret_cast<const unsigned short*>(p.scales + rows[r] * scale_stride + input / 16)) : 0u;
      }
#pragma unroll
      for (int w = 0; w < 4; ++w)
        chunk[u].x[w] = valid && x_valid ? __ldg(reinterpret_cast<const uint4*>(p.x + g * p.x_stride + input + 8 * w))
                                         : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      uint32_t scale[2][2];
      decode_scales(chunk[u].scales[0], scale[0]);
      decode_scales(chunk[u].scales[1], scale[1]);
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const uint4 x = chunk[u].x[w];
        const uint32_t word[2] = {(&chunk[u].codes[0].x)[w], (&chunk[u].codes[1].x)[w]};
        const int block = w / 2;  // words 0, 1: the lane's first 16 inputs; 2, 3: the second
        // mma 1: code pairs (n3, n7), (n2, n6) against x pairs (x3, x7), (x2, x6).
        uint32_t a[4];
        a[0] = scale_pair(decode_pair(word[0]), scale[0][block]);
        a[1] = scale_pair(decode_pair(word[1]), scale[1][block]);
        a[2] = scale_pair(decode_pair(word[0] << 4), scale[0][block]);
        a[3] = scale_pair(decode_pair(word[1] << 4), scale[1][block]);
        mma_bf16(acc, a, permute(x.y, x.w, 0x7632), permute(x.y, x.w, 0x5410));
        // mma 2: (n1, n5), (n0, n4) against (x1, x5), (x0, x4).
        a[0] = scale_pair(decode_pair(word[0] << 8), scale[0][block]);
        a[1] = scale_pair(decode_pair(word[1] << 8), scale[1][block]);
        a[2] = scale_pair(decode_pair(word[0] << 12), scale[0][block]);
        a[3] = scale_pair(decode_pair(word[1] << 12), scale[1][block]);
        mma_bf16(acc, a, permute(x.x, x.z, 0x7632), permute(x.x, x.z, 0x5410));
      }
    }
  }

  // acc: (row g, columns 2c, 2c + 1), (row g + 8, same columns). Sum the warps, scale, store BF16.
  partial[warp][g][2 * c] = acc[0];
  partial[warp][g][2 * c + 1] = acc[1];
  partial[warp][g + 8][2 * c] = acc[2];
  partial[warp][g + 8][2 * c + 1] = acc[3];
  __syncthreads();
  const int row = static_cast<int>(threadIdx.x) / kMaxRows, column = static_cast<int>(threadIdx.x) % kMaxRows;
  if (row0 + row >= p.out || column >= p.n_rows) return;
  float sum = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) sum += partial[w][row][column];
  p.y[column * p.y_stride + row0 + row] = __bfloat16_as_ushort(__float2bfloat16_rn(sum * p.result_scale));
}

bool aligned16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

bool nvfp4_gemv_supported(const void* x, int64_t x_row_stride, const void* codes, int64_t n_rows, int64_t in_features) {
  return n_rows >= 1 && n_rows <= kMaxRows && in_features % 32 == 0 && in_features < (int64_t{1} << 30) &&
         aligned16(x) && aligned16(codes) && (n_rows == 1 || x_row_stride % 8 == 0);
}

void nvfp4_gemv(const void* x, int64_t x_row_stride, const uint8_t* codes, const uint8_t* scales, float tensor_scale,
                int64_t n_rows, int64_t out_features, int64_t in_features, void* y, int64_t y_row_stride) {
  if (n_rows == 0 || out_features == 0) return;
  GemvParams params{};
  params.x = static_cast<const uint16_t*>(x);
  params.codes = codes;
  params.scales = scales;
  params.y = static_cast<uint16_t*>(y);
  params.x_stride = x_row_stride;
  params.y_stride = y_row_stride;
  params.out = out_features;
  params.in = static_cast<int>(in_features);
  params.n_rows = static_cast<int>(n_rows);
  params.chunks = static_cast<int>((in_features + kChunkInputs - 1) / kChunkInputs);
  params.result_scale = tensor_scale * kResultBias;
  const auto blocks = static_cast<unsigned int>((out_features + kRows - 1) / kRows);
  NVFP4LM_LAUNCH(nvfp4_gemv_kernel, blocks, kThreads, 0)(params);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
