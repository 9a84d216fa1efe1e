// CUDA twin of quant/nvfp4.cpp: the same per-block rule (quant/nvfp4_block.h) in fp32 with IEEE division, so
// the bytes match the CPU reference exactly. Kernels:
//  - amax_kernel: max |x| over the flat matrix, 8 consecutive values per thread and item (the count % 8 last ones
//    one per thread), block_max (core/cuda/reduce.cuh), then atomicMax on the float's bits (which order like the
//    values since all are >= 0); and the lowest flat index of a non-finite element (atomicMin), into one
//    AmaxAccumulator (quant/amax_accumulator.h, whose fold_magnitude is the per-element rule). A maximum is exact,
//    so the result does not depend on the launch. The host reads both back with one sync (the callers need the
//    tensor scale on the host, and report a non-finite value as an Error with its row and column).
//  - quantize_kernel: a CTA covers 16 rows x 256 columns, one warp per row, 8 consecutive values per lane, so
//    every warp load and store is contiguous; 2 lanes share a 1x16 block (amax by a shuffle), and in Tile16x16
//    mode the 16 warps combine their block amaxes through shared memory. Each lane stores 4 bytes of codes
//    (and one lane per block the scale byte), or (fake quantization) its 8 decoded values.
//  - dequantize_vector_kernel: the matrix as a flat array (blocks never straddle rows, so an element's flat
//    index alone locates its code, scale and output); each thread writes 16 bytes per item (8 BF16 / 4 F32
//    values) so a warp stores 512 contiguous bytes, from one 4- or 2-byte code load and one scale byte.
//    Memory bound: 0.56 bytes in per 2 (BF16) or 4 (F32) bytes out. dequantize_scalar_kernel is the fallback
//    for pointers without that alignment.
// Every pointer is checked for 16-byte alignment on the host; a view that is not aligned takes scalar paths.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cuda/check.h"
#include "core/cuda/grid_stride.h"
#include "core/cuda/launch.h"
#include "core/cuda/reduce.cuh"
#include "core/numeric.h"
#include "core/rng.h"
#include "quant/amax_accumulator.h"
#include "quant/cuda/nvfp4_cuda.h"
#include "quant/nvfp4_block.h"

namespace nvfp4lm::cuda {
namespace {

constexpr int kBlock = 16;  // kNvfp4BlockSize (quant/nvfp4.h is not included here)
constexpr int kThreads = 256;

enum class OutKind { Codes, F32, BF16 };

static_assert(sizeof(AmaxAccumulator) == kNvfp4AmaxScratchBytes);

bool aligned16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

// ---- element loads and stores (BF16 is handled as raw uint16_t with numeric.h's RNE conversion) --------------

__device__ __forceinline__ float load1(const float* source) { return *source; }
__device__ __forceinline__ float load1(const uint16_t* source) { return bf16_to_float(*source); }

// 8 consecutive values starting at a multiple-of-8 element.
__device__ __forceinline__ void load8(const float* source, float* values, bool aligned) {
  if (aligned) {
    const float4 a = reinterpret_cast<const float4*>(source)[0];
    const float4 b = reinterpret_cast<const float4*>(source)[1];
    values[0] = a.x, values[1] = a.y, values[2] = a.z, values[3] = a.w;
    values[4] = b.x, values[5] = b.y, values[6] = b.z, values[7] = b.w;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) values[i] = source[i];
  }
}

__device__ __forceinline__ void load8(const uint16_t* source, float* values, bool aligned) {
  if (aligned) {
    const uint4 words = *reinterpret_cast<const uint4*>(source);
    const unsigned int w[4] = {words.x, words.y, words.z, words.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // little endian: element 2i in the low half
      values[2 * i] = __uint_as_float(w[i] << 16);
      values[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) values[i] = bf16_to_float(source[i]);
  }
}

// Two floats to two BF16 in one word (first in the low half) with cvt.rn.bf16x2.f32: round to nearest even,
// the same bits as numeric.h's float_to_bf16 except for NaN payloads (which only a NaN scale byte can make).
__device__ __forceinline__ unsigned int pack_bf16x2(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const unsigned int*>(&pair);
}

// ---- amax ------------------------------------------------------------------------------------------------

template <typename In>
__global__ void __launch_bounds__(kThreads)
    amax_kernel(const In* __restrict__ input, int64_t count, bool aligned, AmaxAccumulator* result) {
  NVFP4LM_SHARED(float[kThreads / 32], warp_maxima);
  float thread_max = 0.0f;
  unsigned long long thread_first_bad = kNoNonFinite;
  const int64_t chunks = count / 8;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t chunk = thread; chunk < chunks; chunk += stride) {
    float values[8];
    load8(input + chunk * 8, values, aligned);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      fold_magnitude(values[i], static_cast<unsigned long long>(chunk * 8 + i), thread_max, thread_first_bad);
  }
  // The last count % 8 elements (none in an NVFP4 matrix, whose rows are multiples of 16 long).
  const int64_t tail = chunks * 8 + thread;
  if (tail < count)
    fold_magnitude(load1(input + tail), static_cast<unsigned long long>(tail), thread_max, thread_first_bad);
  const float block = block_max(thread_max, warp_maxima);
  if (threadIdx.x == 0) atomicMax(&result->amax_bits, __float_as_uint(block));
  if (thread_first_bad != kNoNonFinite) atomicMin(&result->first_non_finite, thread_first_bad);  // rare
}

template <typename In>
Nvfp4AmaxResult amax_of(const In* input, int64_t count, void* scratch) {
  AmaxAccumulator* result = static_cast<AmaxAccumulator*>(scratch);
  cudaStream_t s = stream();
  NVFP4LM_CUDA_CHECK(cudaMemsetAsync(&result->amax_bits, 0, sizeof(unsigned int), s));
  NVFP4LM_CUDA_CHECK(cudaMemsetAsync(&result->first_non_finite, 0xFF, sizeof(unsigned long long), s));
  if (count > 0) {
    const int64_t chunks = count / 8;
    // At most 4096 blocks (enough to fill a GPU): fewer atomics on the one result word.
    NVFP4LM_LAUNCH(amax_kernel<In>, grid_stride_blocks(chunks, kThreads, 4096), kThreads, 0)
    (input, count, aligned16(input), result);
    NVFP4LM_CUDA_CHECK_LAUNCH();
  }
  AmaxAccumulator host{};
  NVFP4LM_CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof(AmaxAccumulator), cudaMemcpyDeviceToHost, s));
  NVFP4LM_CUDA_CHECK(cudaStreamSynchronize(s));
  Nvfp4AmaxResult out;
  out.amax = bits_float(host.amax_bits);
  if (host.first_non_finite != kNoNonFinite) {
    out.first_non_finite = static_cast<int64_t>(host.first_non_finite);
    In bad{};
    NVFP4LM_CUDA_CHECK(cudaMemcpyAsync(&bad, input + out.first_non_finite, sizeof(In), cudaMemcpyDeviceToHost, s));
    NVFP4LM_CUDA_CHECK(cudaStreamSynchronize(s));
    if constexpr (sizeof(In) == 4)
      out.non_finite_value = bad;
    else
      out.non_finite_value = bf16_to_float(bad);
  }
  return out;
}

// ---- quantize / fake-quantize -----------------------------------------------------------------------------

struct QuantizeArgs {
  int64_t rows, cols;
  float tensor_scale;
  bool tile, stochastic, aligned;
  uint64_t seed;
  uint8_t* codes;   // OutKind::Codes
  uint8_t* scales;  // OutKind::Codes
  void* out;        // OutKind::F32 / BF16
};

// Four consecutive values (at a multiple-of-4 element), and their stores: 16 bytes of F32 / 8 of BF16.
__device__ __forceinline__ void load4(const float* source, float* values, bool aligned) {
  if (aligned) {
    const float4 v = *reinterpret_cast<const float4*>(source);
    values[0] = v.x, values[1] = v.y, values[2] = v.z, values[3] = v.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) values[i] = source[i];
  }
}

__device__ __forceinline__ void load4(const uint16_t* source, float* values, bool aligned) {
  if (aligned) {
    const uint2 words = *reinterpret_cast<const uint2*>(source);
    values[0] = __uint_as_float(words.x << 16), values[1] = __uint_as_float(words.x & 0xFFFF0000u);
    values[2] = __uint_as_float(words.y << 16), values[3] = __uint_as_float(words.y & 0xFFFF0000u);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) values[i] = bf16_to_float(source[i]);
  }
}

__device__ __forceinline__ void store4(float* target, const float* values, bool aligned) {
  if (aligned) {
    *reinterpret_cast<float4*>(target) = make_float4(values[0], values[1], values[2], values[3]);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) target[i] = values[i];
  }
}

__device__ __forceinline__ void store4(uint16_t* target, const float* values, bool aligned) {
  if (aligned) {
    *reinterpret_cast<uint2*>(target) =
        make_uint2(pack_bf16x2(values[0], values[1]), pack_bf16x2(values[2], values[3]));
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) target[i] = __bfloat16_as_ushort(__float2bfloat16_rn(values[i]));
  }
}

constexpr int kQuantizeRows = 16;                     // rows per CTA: one warp per row, one 16x16 tile tall
constexpr int kQuantizeThreads = 32 * kQuantizeRows;  // 512

// grid.x: groups of 16 rows; grid.y: groups of 32 * kValues columns. threadIdx.y: row in the group (one warp
// per row), threadIdx.x: lane, which holds kValues consecutive values, so 16 / kValues lanes hold one 1x16
// block and every load and store of a warp is contiguous. The block amax is a shuffle reduction over those
// lanes; a 16x16 tile's amax then goes through shared memory across the 16 warps.
template <typename In, OutKind kOut, int kValues>
__global__ void __launch_bounds__(kQuantizeThreads) quantize_kernel(const In* __restrict__ input, QuantizeArgs args) {
  constexpr int kLanesPerBlock = kBlock / kValues;
  const int lane = threadIdx.x;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kQuantizeRows + threadIdx.y;
  const int64_t col = (static_cast<int64_t>(blockIdx.y) * 32 + lane) * kValues;
  // cols is a multiple of 16, so the lanes of a block are all active or all inactive.
  const bool active = row < args.rows && col < args.cols;
  const int64_t first = row * args.cols + col;  // flat index of this lane's first value

  float values[kValues] = {};
  float block_amax = 0.0f;
  if (active) {
#pragma unroll
    for (int i = 0; i < kValues; i += 4) load4(input + first + i, values + i, args.aligned);
#pragma unroll
    for (int i = 0; i < kValues; ++i) block_amax = fmaxf(block_amax, fabsf(values[i]));
  }
#pragma unroll
  for (int offset = 1; offset < kLanesPerBlock; offset *= 2)
    block_amax = fmaxf(block_amax, __shfl_xor_sync(0xFFFFFFFFu, block_amax, offset));
  if (args.tile) {  // the same for the whole grid, so every thread reaches the barrier
    NVFP4LM_SHARED(float[kQuantizeRows][32 / kLanesPerBlock], tile_amax);
    if (lane % kLanesPerBlock == 0) tile_amax[threadIdx.y][lane / kLanesPerBlock] = block_amax;
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kQuantizeRows; ++r) block_amax = fmaxf(block_amax, tile_amax[r][lane / kLanesPerBlock]);
  }
  if (!active) return;

  const uint8_t scale_byte = nvfp4_block_scale_byte(block_amax, args.tensor_scale);
  const float denominator = nvfp4_dequant_scale(scale_byte, args.tensor_scale);
  uint8_t codes[kValues];
  if (args.stochastic) {
#pragma unroll
    for (int k = 0; k < kValues; ++k)
      codes[k] =
          nvfp4_encode_stochastic(values[k], denominator, counter_uniform(args.seed, static_cast<uint64_t>(first + k)));
  } else {
#pragma unroll
    for (int k = 0; k < kValues; ++k) codes[k] = nvfp4_encode_rne(values[k], denominator);
  }

  if constexpr (kOut == OutKind::Codes) {
    using CodeWord = std::conditional_t<kValues == 8, unsigned int, unsigned short>;
    CodeWord packed = 0;
#pragma unroll
    for (int i = 0; i < kValues / 2; ++i)
      packed |= static_cast<CodeWord>(static_cast<CodeWord>(pack_e2m1_pair(codes[2 * i], codes[2 * i + 1])) << (8 * i));
    *reinterpret_cast<CodeWord*>(args.codes + first / 2) = packed;  // aligned: first is a multiple of kValues
    if (lane % kLanesPerBlock == 0) args.scales[first / kBlock] = scale_byte;
  } else {
    using Out = std::conditional_t<kOut == OutKind::F32, float, uint16_t>;
#pragma unroll
    for (int k = 0; k < kValues; ++k) values[k] = nvfp4_decode(codes[k], denominator);
#pragma unroll
    for (int i = 0; i < kValues; i += 4) store4(static_cast<Out*>(args.out) + first + i, values + i, args.aligned);
  }
}

template <typename In, OutKind kOut, int kValues>
void launch_quantize_with(const void* input, const QuantizeArgs& args) {
  constexpr int64_t kCols = 32 * kValues;
  const int64_t row_groups = (args.rows + kQuantizeRows - 1) / kQuantizeRows;
  const int64_t col_groups = (args.cols + kCols - 1) / kCols;  // <= 65535: checked by the caller
  const dim3 grid(static_cast<unsigned int>(row_groups), static_cast<unsigned int>(col_groups));
  const dim3 threads(32, kQuantizeRows);
  NVFP4LM_LAUNCH((quantize_kernel<In, kOut, kValues>), grid, threads, 0)(static_cast<const In*>(input), args);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

// 8 values per lane: measured on an H100 (2560 x 9728) against 4 per lane and against one thread per 1x16
// block: the kernel is instruction bound (IEEE division + rounding per element), and 8 per lane amortizes the
// per-block scale computation over more values while keeping loads and stores contiguous per warp.
template <typename In, OutKind kOut>
void launch_quantize(const void* input, const QuantizeArgs& args) {
  launch_quantize_with<In, kOut, 8>(input, args);
}

template <OutKind kOut>
void quantize_dispatch(const void* input, bool bf16, QuantizeArgs args) {
  if (bf16)
    launch_quantize<uint16_t, kOut>(input, args);
  else
    launch_quantize<float, kOut>(input, args);
}

QuantizeArgs make_args(const void* input, int64_t rows, int64_t cols, const Nvfp4KernelOptions& options) {
  QuantizeArgs args{};
  args.rows = rows;
  args.cols = cols;
  args.tensor_scale = options.tensor_scale;
  args.tile = options.tile;
  args.stochastic = options.stochastic;
  args.seed = options.seed;
  args.aligned = aligned16(input);
  return args;
}

// ---- dequantize -------------------------------------------------------------------------------------------

// Fast path: each thread writes 16 bytes of output per item (8 BF16 or 4 F32 values), so a warp's store is
// 512 contiguous bytes; it reads the item's 4 (BF16) or 2 (F32) code bytes in one load and its block's scale
// byte. kUnroll items per thread, loads first, for more bytes in flight.
template <typename Out, int kUnroll>
__global__ void __launch_bounds__(kThreads)
    dequantize_vector_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales, int64_t items,
                             float tensor_scale, Out* __restrict__ out) {
  constexpr int kValues = 16 / sizeof(Out);  // per item
  using CodeWord = std::conditional_t<kValues == 8, unsigned int, unsigned short>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * kUnroll;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x * kUnroll + threadIdx.x; base < items;
       base += stride) {
    CodeWord words[kUnroll];
    uint8_t scale_bytes[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t item = base + static_cast<int64_t>(u) * blockDim.x;
      if (item < items) {
        words[u] = reinterpret_cast<const CodeWord*>(codes)[item];
        scale_bytes[u] = scales[item * kValues / kBlock];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t item = base + static_cast<int64_t>(u) * blockDim.x;
      if (item >= items) break;
      const float denominator = nvfp4_dequant_scale(scale_bytes[u], tensor_scale);
      float values[kValues];
#pragma unroll
      for (int i = 0; i < kValues / 2; ++i) {
        const uint8_t byte = static_cast<uint8_t>(words[u] >> (8 * i));
        values[2 * i] = nvfp4_decode(e2m1_low_code(byte), denominator);
        values[2 * i + 1] = nvfp4_decode(e2m1_high_code(byte), denominator);
      }
      if constexpr (kValues == 8) {
        unsigned int w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] = pack_bf16x2(values[2 * i], values[2 * i + 1]);
        reinterpret_cast<uint4*>(out)[item] = make_uint4(w[0], w[1], w[2], w[3]);
      } else {
        reinterpret_cast<float4*>(out)[item] = make_float4(values[0], values[1], values[2], values[3]);
      }
    }
  }
}

// Any alignment: one thread per 1x16 block, byte loads and scalar stores.
template <typename Out>
__global__ void __launch_bounds__(kThreads)
    dequantize_scalar_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales, int64_t blocks,
                             float tensor_scale, Out* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t block = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; block < blocks; block += stride) {
    const float denominator = nvfp4_dequant_scale(scales[block], tensor_scale);
    float values[kBlock];
#pragma unroll
    for (int i = 0; i < kBlock / 2; ++i) {
      const uint8_t byte = codes[block * 8 + i];
      values[2 * i] = nvfp4_decode(e2m1_low_code(byte), denominator);
      values[2 * i + 1] = nvfp4_decode(e2m1_high_code(byte), denominator);
    }
#pragma unroll
    for (int i = 0; i < kBlock; i += 4) store4(out + block * kBlock + i, values + i, false);
  }
}

template <typename Out>
void launch_dequantize(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, float tensor_scale,
                       Out* out) {
  constexpr int64_t kValues = 16 / sizeof(Out);
  constexpr int kUnroll = 2;
  const int64_t count = rows * cols;
  const bool vector = reinterpret_cast<uintptr_t>(codes) % (kValues / 2) == 0 && aligned16(out);
  if (vector) {
    const int64_t items = count / kValues;  // count is a multiple of 16
    NVFP4LM_LAUNCH((dequantize_vector_kernel<Out, kUnroll>), grid_stride_blocks(items, int64_t{kThreads} * kUnroll),
                   kThreads, 0)
    (codes, scales, items, tensor_scale, out);
  } else {
    const int64_t blocks = count / kBlock;
    NVFP4LM_LAUNCH(dequantize_scalar_kernel<Out>, grid_stride_blocks(blocks, kThreads), kThreads, 0)
    (codes, scales, blocks, tensor_scale, out);
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace

Nvfp4AmaxResult nvfp4_amax(const void* input, bool bf16, int64_t rows, int64_t cols, void* scratch) {
  if (bf16) return amax_of(static_cast<const uint16_t*>(input), rows * cols, scratch);
  return amax_of(static_cast<const float*>(input), rows * cols, scratch);
}

void nvfp4_quantize(const void* input, bool bf16, int64_t rows, int64_t cols, const Nvfp4KernelOptions& options,
                    uint8_t* codes, uint8_t* scales) {
  QuantizeArgs args = make_args(input, rows, cols, options);
  args.codes = codes;
  args.scales = scales;
  quantize_dispatch<OutKind::Codes>(input, bf16, args);
}

void nvfp4_fake_quantize(const void* input, bool bf16, int64_t rows, int64_t cols, const Nvfp4KernelOptions& options,
                         void* out, bool out_bf16) {
  QuantizeArgs args = make_args(input, rows, cols, options);
  args.aligned = args.aligned && aligned16(out);
  args.out = out;
  if (out_bf16)
    quantize_dispatch<OutKind::BF16>(input, bf16, args);
  else
    quantize_dispatch<OutKind::F32>(input, bf16, args);
}

void nvfp4_dequantize(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, float tensor_scale,
                      void* out, bool out_bf16) {
  if (out_bf16)
    launch_dequantize(codes, scales, rows, cols, tensor_scale, static_cast<uint16_t*>(out));
  else
    launch_dequantize(codes, scales, rows, cols, tensor_scale, static_cast<float*>(out));
}

}  // namespace nvfp4lm::cuda
