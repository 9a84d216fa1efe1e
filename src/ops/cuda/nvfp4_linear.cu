// Fused NVFP4 W4A16 GEMV / skinny GEMM ("cuda/nvfp4-w4a16", see nvfp4_linear.h): y = x · deq(w)ᵀ for N <= 32
// rows of x, memory bound on the packed weight, with the decode step's neighbours fused in (q/k/v in one launch,
// the residual add, gate/up + SwiGLU).
//
// Work split: a CTA of 8 warps owns one 16-row mma tile of output features (for SwiGLU: 8 gate rows over 8 up rows
// of the same features); its warps split the input dimension in chunks of 128 inputs (warp w takes chunks w,
// w + 8, ...) and meet in shared memory at the end. A warp keeps two groups of 4 chunks in flight: the loads of
// the next group are issued before the current one is multiplied, so a warp's memory traffic does not stop while
// it computes (Little's law: ~3 TB/s x ~1 us of latency needs ~3 MB in flight across the GPU, ~24 KB an SM: two
// groups of 8 warps' 4 chunks of 16 rows x 64 bytes is 64 KB a CTA). Within a warp, lane (g, c) = (lane / 4,
// lane % 4) reads, per chunk, 16 bytes of codes (32 inputs: 128 * chunk + 32 c ..) of tile rows g and g + 8 and
// their two scale bytes, and, per column tile t, x row 8 t + g (the mma's column g, zeros past N) at the same 32
// inputs, so every 16-byte load is coalesced per quad and the fragments need no shuffles: the k order inside each
// mma is permuted identically for A and B.
//
// Decoding (per 32-bit word of 8 codes, n0 in the low nibble): BF16 with bits sign << 15 | magnitude << 6 is
// exactly e2m1 * 2^-126 (code 1, i.e. 0.5, becomes the BF16 subnormal 2^-127); words are paired as (n3, n7),
// (n2, n6), (n1, n5), (n0, n4) by shifting the word 4 bits at a time (Marlin's trick). One HMUL2 by the block
// scale taken as BF16(e4m3 * 2^116) makes the fragment code * e4m3 * 2^-10 — exact (2 + 4 significant bits), a
// normal BF16 — and the fp32 result is multiplied by tensor_scale * 2^10 at the end. The x fragments are the
// same permutation of x's 8 BF16 values (byte permutes).
//
// Summation order of one output: per warp, its chunks in increasing order (two mma per 32-bit word), then the 8
// warps' partial sums in warp order. It depends on nothing but the input size, so a row of x gets the same bits
// alone, in any batch, and in any of the fused forms.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "ops/cuda/nvfp4_linear.h"
#include "ops/cuda/ptx.h"
#include "ops/cuda/swiglu_math.cuh"

namespace nvfp4lm::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileRows = 16;  // output rows of an mma tile: one CTA's
constexpr int kFeaturesPerSwiGluCta = kTileRows / 2;
constexpr int kChunkInputs = 128;  // inputs per warp chunk (4 lanes x 32)
constexpr int kAhead = 3;          // chunks per group; two groups per warp in flight
constexpr int kTileColumns = 8;    // rows of x per column tile (the mma's N)
constexpr int kMaxWeights = 3;
constexpr float kScaleBias = 0x1p116f;  // block scales are taken as e4m3 * 2^116 ...
constexpr float kResultBias = 0x1p10f;  // ... so products come out as value * 2^-10

struct Chunk {
  uint4 codes[2];   // tile rows g and g + 8, 32 codes each
  uint32_t scales;  // their scale bytes (blocks 2 c, 2 c + 1): row g's in the low half, row g + 8's in the high
};

struct GemvParams {
  const uint16_t* x;
  int64_t x_stride;
  int n_rows, in, chunks;
  const uint8_t* codes[kMaxWeights];
  const uint8_t* scales[kMaxWeights];
  float result_scale[kMaxWeights];  // tensor_scale * 2^10
  int64_t rows[kMaxWeights];
  uint16_t* y[kMaxWeights];
  int64_t y_stride[kMaxWeights];
  unsigned cta_begin_of_weight[kMaxWeights];  // Store / AddResidual: weight s owns CTAs from here to the next's
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

__device__ __forceinline__ float bf16_bits_to_float(uint16_t bits) {
  return __bfloat162float(__ushort_as_bfloat16(bits));
}
__device__ __forceinline__ uint16_t float_to_bf16_bits(float value) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(value));
}

// Element `i` of a kernel-parameter array, by selects: indexing the array with a run-time index would copy it to
// local memory.
template <typename T>
__device__ __forceinline__ T pick(const T (&values)[kMaxWeights], int i) {
  return i == 0 ? values[0] : (i == 1 ? values[1] : values[2]);
}

// Where tile rows g and g + 8 of this CTA come from.
struct TileRows {
  const uint8_t* codes[2];
  const uint8_t* scales[2];
  bool valid[2];
};

template <Nvfp4GemvEpilogue kEpilogue>
__device__ __forceinline__ int weight_of_cta(const GemvParams& p) {
  if constexpr (kEpilogue == Nvfp4GemvEpilogue::Store) {
    return blockIdx.x >= p.cta_begin_of_weight[2] ? 2 : (blockIdx.x >= p.cta_begin_of_weight[1] ? 1 : 0);
  } else {
    return 0;
  }
}

template <Nvfp4GemvEpilogue kEpilogue>
__device__ __forceinline__ TileRows tile_rows(const GemvParams& p, int weight, int g) {
  TileRows t;
  const int64_t code_stride = p.in / 2, scale_stride = p.in / 16;
  if constexpr (kEpilogue == Nvfp4GemvEpilogue::SwiGlu) {
    // Row g of the tile is gate feature f, row g + 8 up feature f: both halves of one SwiGLU output.
    const int64_t feature = static_cast<int64_t>(blockIdx.x) * kFeaturesPerSwiGluCta + g;
    for (int r = 0; r < 2; ++r) {
      t.valid[r] = feature < p.rows[r];
      t.codes[r] = p.codes[r] + feature * code_stride;
      t.scales[r] = p.scales[r] + feature * scale_stride;
    }
  } else {
    const int64_t row0 = static_cast<int64_t>(blockIdx.x - pick(p.cta_begin_of_weight, weight)) * kTileRows;
    for (int r = 0; r < 2; ++r) {
      const int64_t row = row0 + g + 8 * r;
      t.valid[r] = row < pick(p.rows, weight);
      t.codes[r] = pick(p.codes, weight) + row * code_stride;
      t.scales[r] = pick(p.scales, weight) + row * scale_stride;
    }
  }
  return t;
}

__device__ __forceinline__ void load_group(const GemvParams& p, const TileRows& t, int first, int c,
                                           Chunk (&group)[kAhead]) {
#pragma unroll
  for (int u = 0; u < kAhead; ++u) {
    const int chunk = first + u * kWarps;
    const int input = chunk * kChunkInputs + 32 * c;
    const bool valid = chunk < p.chunks && input < p.in;  // in % 32 == 0: all 32 or none
    group[u].scales = 0;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const bool load = valid && t.valid[r];
      group[u].codes[r] = load ? load_streaming(t.codes[r] + input / 2) : make_uint4(0, 0, 0, 0);
      const uint32_t scale_bytes = load ? __ldg(reinterpret_cast<const unsigned short*>(t.scales[r] + input / 16)) : 0u;
      group[u].scales |= scale_bytes << (16 * r);
    }
  }
}

template <int kTiles>
__device__ __forceinline__ void multiply_group(const GemvParams& p, int first, int g, int c,
                                               const Chunk (&group)[kAhead], float (&acc)[kTiles][4]) {
#pragma unroll
  for (int u = 0; u < kAhead; ++u) {
    const int chunk = first + u * kWarps;
    if (chunk >= p.chunks) break;  // the same for the whole warp
    const int input = chunk * kChunkInputs + 32 * c;
    const bool in_range = input < p.in;
    uint32_t scale[2][2];
    decode_scales(group[u].scales & 0xFFFFu, scale[0]);
    decode_scales(group[u].scales >> 16, scale[1]);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t word[2] = {(&group[u].codes[0].x)[w], (&group[u].codes[1].x)[w]};
      const int block = w / 2;  // words 0, 1: the lane's first 16 inputs; 2, 3: the second
      // mma 1: code pairs (n3, n7), (n2, n6) against x pairs (x3, x7), (x2, x6); mma 2: (n1, n5), (n0, n4).
      uint32_t a1[4], a2[4];
      a1[0] = scale_pair(decode_pair(word[0]), scale[0][block]);
      a1[1] = scale_pair(decode_pair(word[1]), scale[1][block]);
      a1[2] = scale_pair(decode_pair(word[0] << 4), scale[0][block]);
      a1[3] = scale_pair(decode_pair(word[1] << 4), scale[1][block]);
      a2[0] = scale_pair(decode_pair(word[0] << 8), scale[0][block]);
      a2[1] = scale_pair(decode_pair(word[1] << 8), scale[1][block]);
      a2[2] = scale_pair(decode_pair(word[0] << 12), scale[0][block]);
      a2[3] = scale_pair(decode_pair(word[1] << 12), scale[1][block]);
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        const int n = t * kTileColumns + g;
        const uint4 x = in_range && n < p.n_rows
                            ? __ldg(reinterpret_cast<const uint4*>(p.x + n * p.x_stride + input + 8 * w))
                            : make_uint4(0, 0, 0, 0);
        mma_bf16(acc[t], a1, permute(x.y, x.w, 0x7632), permute(x.y, x.w, 0x5410));
        mma_bf16(acc[t], a2, permute(x.x, x.z, 0x7632), permute(x.x, x.z, 0x5410));
      }
    }
  }
}

// kTiles column tiles of 8 rows of x each (1, 2 or 4).
template <int kTiles, Nvfp4GemvEpilogue kEpilogue>
__global__ void __launch_bounds__(kThreads, kTiles == 1 ? 2 : 1) nvfp4_gemv_kernel(GemvParams p) {
  constexpr int kColumns = kTiles * kTileColumns;
  NVFP4LM_SHARED(float[kWarps][kTileRows][kColumns], partial);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const int weight = weight_of_cta<kEpilogue>(p);
  const TileRows rows = tile_rows<kEpilogue>(p, weight, g);

  float acc[kTiles][4];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
  constexpr int kStep = kWarps * kAhead;  // chunks between one group of a warp and its next
  Chunk a[kAhead], b[kAhead];
  load_group(p, rows, warp, c, a);
  for (int first = warp; first < p.chunks; first += 2 * kStep) {
    load_group(p, rows, first + kStep, c, b);  // in flight while group a is multiplied
    multiply_group<kTiles>(p, first, g, c, a, acc);
    load_group(p, rows, first + 2 * kStep, c, a);
    multiply_group<kTiles>(p, first + kStep, g, c, b, acc);
  }

  // acc[t]: (tile row g, columns 8 t + 2c, + 1), (tile row g + 8, the same columns). Sum the warps in order.
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    partial[warp][g][t * kTileColumns + 2 * c] = acc[t][0];
    partial[warp][g][t * kTileColumns + 2 * c + 1] = acc[t][1];
    partial[warp][g + 8][t * kTileColumns + 2 * c] = acc[t][2];
    partial[warp][g + 8][t * kTileColumns + 2 * c + 1] = acc[t][3];
  }
  __syncthreads();
  auto sum_of = [&](int tile_row, int column) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w][tile_row][column];
    return sum;
  };
  if constexpr (kEpilogue == Nvfp4GemvEpilogue::SwiGlu) {
    // 8 features x kColumns rows of x; consecutive threads write consecutive features of one row.
    for (int item = static_cast<int>(threadIdx.x); item < kFeaturesPerSwiGluCta * kColumns; item += kThreads) {
      const int f = item % kFeaturesPerSwiGluCta, n = item / kFeaturesPerSwiGluCta;
      const int64_t feature = static_cast<int64_t>(blockIdx.x) * kFeaturesPerSwiGluCta + f;
      if (feature >= p.rows[0] || n >= p.n_rows) continue;
      const float gate = bf16_bits_to_float(float_to_bf16_bits(sum_of(f, n) * p.result_scale[0]));
      const float up = bf16_bits_to_float(float_to_bf16_bits(sum_of(f + 8, n) * p.result_scale[1]));
      p.y[0][n * p.y_stride[0] + feature] = float_to_bf16_bits(kernels::swiglu_value(gate, up));
    }
  } else {
    const int64_t row0 = static_cast<int64_t>(blockIdx.x - pick(p.cta_begin_of_weight, weight)) * kTileRows;
    const int64_t rows = pick(p.rows, weight), y_stride = pick(p.y_stride, weight);
    uint16_t* const y_base = pick(p.y, weight);
    const float result_scale = pick(p.result_scale, weight);
    for (int item = static_cast<int>(threadIdx.x); item < kTileRows * kColumns; item += kThreads) {
      const int r = item % kTileRows, n = item / kTileRows;
      if (row0 + r >= rows || n >= p.n_rows) continue;
      uint16_t& y = y_base[n * y_stride + row0 + r];
      const uint16_t product = float_to_bf16_bits(sum_of(r, n) * result_scale);
      if constexpr (kEpilogue == Nvfp4GemvEpilogue::AddResidual) {
        y = float_to_bf16_bits(bf16_bits_to_float(y) + bf16_bits_to_float(product));
      } else {
        y = product;
      }
    }
  }
}

bool aligned16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

template <Nvfp4GemvEpilogue kEpilogue>
void launch(const GemvParams& params, unsigned blocks, int64_t n_rows) {
  if (n_rows <= kTileColumns) {
    NVFP4LM_LAUNCH((nvfp4_gemv_kernel<1, kEpilogue>), blocks, kThreads, 0)(params);
  } else if (n_rows <= 2 * kTileColumns) {
    NVFP4LM_LAUNCH((nvfp4_gemv_kernel<2, kEpilogue>), blocks, kThreads, 0)(params);
  } else {
    NVFP4LM_LAUNCH((nvfp4_gemv_kernel<4, kEpilogue>), blocks, kThreads, 0)(params);
  }
}

}  // namespace

bool nvfp4_gemv_supported(const Nvfp4Gemv& problem) {
  const int64_t n = problem.n_rows, in = problem.in_features;
  bool ok = n >= 1 && n <= kNvfp4GemvMaxRows && in > 0 && in % 32 == 0 && in < (int64_t{1} << 30) &&
            aligned16(problem.x) && (n == 1 || problem.x_row_stride % 8 == 0) && problem.weight_count >= 1 &&
            problem.weight_count <= kMaxWeights;
  for (int s = 0; ok && s < problem.weight_count; ++s) ok = aligned16(problem.weights[s].codes);
  switch (problem.epilogue) {
    case Nvfp4GemvEpilogue::Store:
      return ok;
    case Nvfp4GemvEpilogue::AddResidual:
      return ok && problem.weight_count == 1;
    case Nvfp4GemvEpilogue::SwiGlu:
      return ok && problem.weight_count == 2 && problem.weights[0].rows == problem.weights[1].rows;
  }
  return false;
}

void nvfp4_gemv(const Nvfp4Gemv& problem) {
  if (problem.n_rows == 0) return;
  GemvParams params{};
  params.x = static_cast<const uint16_t*>(problem.x);
  params.x_stride = problem.x_row_stride;
  params.n_rows = static_cast<int>(problem.n_rows);
  params.in = static_cast<int>(problem.in_features);
  params.chunks = static_cast<int>((problem.in_features + kChunkInputs - 1) / kChunkInputs);
  unsigned blocks = 0;
  for (int s = 0; s < problem.weight_count; ++s) {
    const Nvfp4GemvWeight& w = problem.weights[s];
    params.codes[s] = w.codes;
    params.scales[s] = w.scales;
    params.result_scale[s] = w.tensor_scale * kResultBias;
    params.rows[s] = w.rows;
    params.y[s] = static_cast<uint16_t*>(w.y);
    params.y_stride[s] = w.y_row_stride;
    params.cta_begin_of_weight[s] = blocks;
    blocks += static_cast<unsigned>((w.rows + kTileRows - 1) / kTileRows);
  }
  for (int s = problem.weight_count; s < kMaxWeights; ++s) params.cta_begin_of_weight[s] = blocks;  // none: never
  switch (problem.epilogue) {
    case Nvfp4GemvEpilogue::Store:
      if (blocks == 0) return;
      launch<Nvfp4GemvEpilogue::Store>(params, blocks, problem.n_rows);
      break;
    case Nvfp4GemvEpilogue::AddResidual:
      if (blocks == 0) return;
      launch<Nvfp4GemvEpilogue::AddResidual>(params, blocks, problem.n_rows);
      break;
    case Nvfp4GemvEpilogue::SwiGlu: {
      const auto features =
          static_cast<unsigned>((problem.weights[0].rows + kFeaturesPerSwiGluCta - 1) / kFeaturesPerSwiGluCta);
      if (features == 0) return;
      launch<Nvfp4GemvEpilogue::SwiGlu>(params, features, problem.n_rows);
      break;
    }
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
