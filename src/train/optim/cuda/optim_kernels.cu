// Optimizer kernels (declared and described in optim_kernels.h). Kernels:
//  - adamw_kernel: one element per thread-iteration of a grid-stride loop; master (F32 or BF16), gradient and both
//    moments are each read and written once (4 + 4 + 8 + 8 bytes, or 2 + 4 + 8 + 8 with a bf16 master). Memory bound.
//    adamw_vec4_kernel: the same four elements at a time with 16-byte accesses, for aligned tensors of a multiple of
//    4 elements (every weight of a Qwen3 model), the same bits.
//  - adamw8bit_kernel: one CTA of kMomentBlockSize (256) threads per moment block, one element per thread: decode
//    both moments (tables in shared memory), update, reduce the two new block maxima (warp shuffles, then the 8 warp
//    values through shared memory; a maximum, so the order does not matter), encode, write the codes and maxima.
//  Both fold each master value they store (bf16: after rounding) into the thread's amax and, given an
//  AmaxAccumulator, end with one block_max per CTA and one atomicMax on the parameter's amax word; a non-finite value
//  goes to the record at once (atomicMin of its index in the whole parameter; rare). The amax costs no memory traffic
//  beyond those 16 bytes. Their grids are capped at kMaxUpdateBlocks CTAs, so a parameter of 10^8 elements makes 16 K
//  atomics on that word, not 400 K (the loops' work per element is the same, hence the same bits).
//  - sum_of_squares_partial_kernel: one CTA of 256 threads per tile of kSumTile elements; thread t accumulates the
//    tile's elements t, t + 256, ... in double (fma), then block_sum's fixed tree (core/cuda/reduce.cuh: shuffles
//    per warp, the 8 warp sums in order). sum_of_squares_total_kernel: one CTA of 1024 threads adds the partials the
//    same way (thread t takes partials t, t + 1024, ...). Fixed trees and fixed tiles: the total depends only on the
//    data.
//  - scale_kernel: data *= factor.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/cuda/check.h"
#include "core/cuda/grid_stride.h"
#include "core/cuda/launch.h"
#include "core/cuda/reduce.cuh"
#include "core/numeric.h"
#include "core/rng.h"
#include "train/optim/cuda/optim_kernels.h"
#include "train/optim/moment_quant.h"
#include "train/optim/stochastic_rounding.h"

namespace nvfp4lm::cuda {
namespace {

constexpr int kThreads = 256;
// CTAs of an update launch at most: ~15 waves of a 132-SM GPU at 8 CTAs per SM, so the grid-stride loops keep every
// SM busy, while the same-address atomics of the amax stay few (see the top of this file).
constexpr int64_t kMaxUpdateBlocks = 16384;

constexpr int kMomentBlock = static_cast<int>(kMomentBlockSize);
static_assert(kMomentBlock == 256, "adamw8bit_kernel runs one thread per element of a moment block");
constexpr int kMomentWarps = kMomentBlock / 32;

constexpr int kSumThreads = 256;
constexpr int kSumPerThread = 64;
constexpr int64_t kSumTile = int64_t{kSumThreads} * kSumPerThread;  // elements per partial
constexpr int kTotalThreads = 1024;

// ---- master weights ---------------------------------------------------------------------------------------------

template <bool kBf16>
__device__ __forceinline__ float load_master(const void* master, int64_t i) {
  if constexpr (kBf16) {
    return bf16_to_float(static_cast<const uint16_t*>(master)[i]);
  } else {
    return static_cast<const float*>(master)[i];
  }
}

// As optimizer.cpp's store_master: BF16 with stochastic rounding drawn from (seed, element index in the parameter),
// `element` = i plus the first element of the chunk the launch updates. Returns the value stored (as fp32).
template <bool kBf16>
__device__ __forceinline__ float store_master(void* master, int64_t i, float value, uint64_t seed, uint64_t element) {
  if constexpr (kBf16) {
    const uint16_t bits = float_to_bf16_stochastic(value, counter_uniform(seed, element));
    static_cast<uint16_t*>(master)[i] = bits;
    return bf16_to_float(bits);
  } else {
    static_cast<float*>(master)[i] = value;
    return value;
  }
}

// Folds a stored master value into the thread's amax (AmaxAccumulator's rule: fold_magnitude's); a non-finite one
// goes straight to the parameter's record by its index in the parameter (rare, so no thread keeps a 64-bit index).
__device__ __forceinline__ void fold_stored(float stored, uint64_t element, float& thread_amax, AmaxAccumulator* amax) {
  const float magnitude = fabsf(stored);
  if (magnitude <= 3.402823466e+38f) {
    thread_amax = fmaxf(thread_amax, magnitude);
  } else if (amax != nullptr) {
    atomicMin(&amax->first_non_finite, static_cast<unsigned long long>(element));
  }
}

// The CTA's part of the parameter's amax (every thread of the CTA must reach it): the threads' maxima through
// block_max, one atomicMax by thread 0.
__device__ __forceinline__ void fold_block_amax(float thread_amax, AmaxAccumulator* amax, float* scratch) {
  const float block = block_max(thread_amax, scratch);
  if (threadIdx.x == 0) atomicMax(&amax->amax_bits, __float_as_uint(block));
}

// ---- AdamW, fp32 moments ----------------------------------------------------------------------------------------

// Occupancy as before the amax fold (ptxas, sm_90a): the bf16 kernel fits 32 registers (8 CTAs per SM), the f32 one
// 40 (6 CTAs; it had 36, which rounds to 40 as well). SM 12.x holds 1536 threads an SM, 6 CTAs of 256: asking it for 8
// only made ptxas warn and drop the bound.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
constexpr int kBf16AdamWCtasPerSm = 6;
#else
constexpr int kBf16AdamWCtasPerSm = 8;
#endif
template <bool kBf16>
__global__ void __launch_bounds__(kThreads, kBf16 ? kBf16AdamWCtasPerSm : 6)
    adamw_kernel(void* __restrict__ master, const float* __restrict__ grad, float* __restrict__ exp_avg,
                 float* __restrict__ exp_avg_sq, int64_t count, AdamWScalars scalars, uint64_t rounding_seed,
                 uint64_t first_element, AmaxAccumulator* amax) {
  NVFP4LM_SHARED(float[kThreads / 32], warp_maxima);
  float thread_amax = 0.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    float m = exp_avg[i];
    float v = exp_avg_sq[i];
    const float updated = adamw_update(load_master<kBf16>(master, i), grad[i], m, v, scalars);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const uint64_t element = first_element + static_cast<uint64_t>(i);
    fold_stored(store_master<kBf16>(master, i, updated, rounding_seed, element), element, thread_amax, amax);
  }
  if (amax != nullptr) fold_block_amax(thread_amax, amax, warp_maxima);
}

// Four consecutive masters at once: 16-byte loads and stores of the gradient and moments (8 bytes of a bf16 master),
// four independent updates per thread iteration, so a warp keeps four times the bytes in flight of adamw_kernel's
// 4-byte accesses. Each element's arithmetic, stochastic-rounding draw and amax fold are adamw_kernel's: the same
// bits. For count % 4 == 0 and every pointer aligned to its vector (adamw_step checks).
template <bool kBf16>
__global__ void __launch_bounds__(kThreads)
    adamw_vec4_kernel(void* __restrict__ master, const float* __restrict__ grad, float* __restrict__ exp_avg,
                      float* __restrict__ exp_avg_sq, int64_t count, AdamWScalars scalars, uint64_t rounding_seed,
                      uint64_t first_element, AmaxAccumulator* amax) {
  NVFP4LM_SHARED(float[kThreads / 32], warp_maxima);
  float thread_amax = 0.0f;
  const int64_t quads = count / 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < quads; q += stride) {
    const float4 g = reinterpret_cast<const float4*>(grad)[q];
    float4 m = reinterpret_cast<const float4*>(exp_avg)[q];
    float4 v = reinterpret_cast<const float4*>(exp_avg_sq)[q];
    float w[4];
    if constexpr (kBf16) {
      const uint2 bits = reinterpret_cast<const uint2*>(master)[q];
      w[0] = bf16_to_float(static_cast<uint16_t>(bits.x & 0xFFFFu));
      w[1] = bf16_to_float(static_cast<uint16_t>(bits.x >> 16));
      w[2] = bf16_to_float(static_cast<uint16_t>(bits.y & 0xFFFFu));
      w[3] = bf16_to_float(static_cast<uint16_t>(bits.y >> 16));
    } else {
      const float4 f = reinterpret_cast<const float4*>(master)[q];
      w[0] = f.x, w[1] = f.y, w[2] = f.z, w[3] = f.w;
    }
    float* ms[4] = {&m.x, &m.y, &m.z, &m.w};
    float* vs[4] = {&v.x, &v.y, &v.z, &v.w};
    const float gs[4] = {g.x, g.y, g.z, g.w};
    float stored[4];
    uint16_t stored_bits[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float updated = adamw_update(w[k], gs[k], *ms[k], *vs[k], scalars);
      const uint64_t element = first_element + static_cast<uint64_t>(4 * q + k);
      if constexpr (kBf16) {
        stored_bits[k] = float_to_bf16_stochastic(updated, counter_uniform(rounding_seed, element));
        stored[k] = bf16_to_float(stored_bits[k]);
      } else {
        stored[k] = updated;
      }
      fold_stored(stored[k], element, thread_amax, amax);
    }
    reinterpret_cast<float4*>(exp_avg)[q] = m;
    reinterpret_cast<float4*>(exp_avg_sq)[q] = v;
    if constexpr (kBf16) {
      reinterpret_cast<uint2*>(master)[q] =
          make_uint2(static_cast<uint32_t>(stored_bits[0]) | static_cast<uint32_t>(stored_bits[1]) << 16,
                     static_cast<uint32_t>(stored_bits[2]) | static_cast<uint32_t>(stored_bits[3]) << 16);
    } else {
      reinterpret_cast<float4*>(master)[q] = make_float4(stored[0], stored[1], stored[2], stored[3]);
    }
  }
  if (amax != nullptr) fold_block_amax(thread_amax, amax, warp_maxima);
}

// ---- AdamW, 8-bit moments ---------------------------------------------------------------------------------------

// The code tables, passed by value as a __grid_constant__ parameter (no global state, no upload) and copied into
// shared memory, where the binary searches of the encoder read them.
struct MomentTables {
  float signed_magnitude[kSignedMagnitudeCodes];
  float unsigned_values[kUnsignedCodes];
};

template <bool kBf16>
__global__ void __launch_bounds__(kMomentBlock)
    adamw8bit_kernel(void* __restrict__ master, const float* __restrict__ grad, Moments8bit state, int64_t count,
                     int64_t blocks, AdamWScalars scalars, Rounding8bitSeeds seeds, uint64_t first_element,
                     AmaxAccumulator* amax, const __grid_constant__ MomentTables tables) {
  NVFP4LM_SHARED(float[kSignedMagnitudeCodes], signed_table);
  NVFP4LM_SHARED(float[kUnsignedCodes], unsigned_table);
  NVFP4LM_SHARED(float[2][kMomentWarps], warp_maxima);
  NVFP4LM_SHARED(float[kMomentWarps], master_warp_maxima);
  static_assert(kSignedMagnitudeCodes <= kMomentBlock && kUnsignedCodes == kMomentBlock);
  if (threadIdx.x < kSignedMagnitudeCodes) signed_table[threadIdx.x] = tables.signed_magnitude[threadIdx.x];
  unsigned_table[threadIdx.x] = tables.unsigned_values[threadIdx.x];
  __syncthreads();

  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  float thread_amax = 0.0f;  // of the master values this thread stores, over all its moment blocks
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    const int64_t i = block * kMomentBlock + threadIdx.x;
    const bool active = i < count;  // the last block may be short
    float exp_avg = 0.0f, exp_avg_sq_sqrt = 0.0f;
    if (active) {
      exp_avg =
          decode_signed_moment(static_cast<uint8_t>(state.exp_avg_codes[i]), state.exp_avg_absmax[block], signed_table);
      const float old_sqrt =
          decode_unsigned_moment(state.exp_avg_sq_sqrt_codes[i], state.exp_avg_sq_sqrt_absmax[block], unsigned_table);
      // As adamw8bit.cpp: v = s * s, the fp32 update, s = sqrt(v).
      float exp_avg_sq = mul_rn(old_sqrt, old_sqrt);
      const float updated = adamw_update(load_master<kBf16>(master, i), grad[i], exp_avg, exp_avg_sq, scalars);
      exp_avg_sq_sqrt = sqrt_rn(exp_avg_sq);
      const uint64_t element = first_element + static_cast<uint64_t>(i);
      fold_stored(store_master<kBf16>(master, i, updated, seeds.master, element), element, thread_amax, amax);
    }
    // Fresh block maxima (the CPU's block_absmax: max of |x| from 0; inactive threads add 0).
    const float m_max = warp_max(abs_bits(exp_avg));
    const float s_max = warp_max(abs_bits(exp_avg_sq_sqrt));
    if (lane == 0) {
      warp_maxima[0][warp] = m_max;
      warp_maxima[1][warp] = s_max;
    }
    __syncthreads();  // also orders every thread's reads of the old maxima before thread 0 overwrites them
    float m_absmax = 0.0f, s_absmax = 0.0f;
#pragma unroll
    for (int w = 0; w < kMomentWarps; ++w) {
      m_absmax = fmaxf(m_absmax, warp_maxima[0][w]);
      s_absmax = fmaxf(s_absmax, warp_maxima[1][w]);
    }
    if (active) {
      const uint64_t element = first_element + static_cast<uint64_t>(i);
      state.exp_avg_codes[i] = static_cast<int8_t>(
          encode_signed_moment(exp_avg, m_absmax, signed_table, counter_uniform(seeds.exp_avg, element)));
      state.exp_avg_sq_sqrt_codes[i] = encode_unsigned_moment(exp_avg_sq_sqrt, s_absmax, unsigned_table,
                                                              counter_uniform(seeds.exp_avg_sq_sqrt, element));
    }
    if (threadIdx.x == 0) {
      state.exp_avg_absmax[block] = m_absmax;
      state.exp_avg_sq_sqrt_absmax[block] = s_absmax;
    }
    __syncthreads();  // warp_maxima is rewritten by the next block
  }
  if (amax != nullptr) fold_block_amax(thread_amax, amax, master_warp_maxima);
}

// ---- sum of squares ---------------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kSumThreads)
    sum_of_squares_partial_kernel(const float* __restrict__ data, int64_t count, double* __restrict__ partials) {
  NVFP4LM_SHARED(double[32], scratch);
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kSumTile;
  double sum = 0.0;
#pragma unroll 8
  for (int k = 0; k < kSumPerThread; ++k) {
    const int64_t i = begin + static_cast<int64_t>(k) * kSumThreads + threadIdx.x;
    if (i < count) {
      const double g = data[i];
      sum = fma(g, g, sum);
    }
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void __launch_bounds__(kTotalThreads)
    sum_of_squares_total_kernel(const double* __restrict__ partials, int64_t count, double* __restrict__ total) {
  NVFP4LM_SHARED(double[32], scratch);
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += kTotalThreads) sum += partials[i];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) *total = sum;
}

// ---- scale ------------------------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads) scale_kernel(float* __restrict__ data, int64_t count, float factor) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    data[i] = __fmul_rn(data[i], factor);
}

}  // namespace

void adamw_step(void* master, bool master_bf16, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t count,
                const AdamWScalars& scalars, uint64_t rounding_seed, uint64_t first_element, AmaxAccumulator* amax) {
  if (count <= 0) return;
  const auto aligned = [](const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  if (count % 4 == 0 && aligned(grad, 16) && aligned(exp_avg, 16) && aligned(exp_avg_sq, 16) &&
      aligned(master, master_bf16 ? 8 : 16)) {
    const unsigned grid = grid_stride_blocks(count / 4, kThreads, kMaxUpdateBlocks);
    if (master_bf16) {
      NVFP4LM_LAUNCH(adamw_vec4_kernel<true>, grid, kThreads, 0)
      (master, grad, exp_avg, exp_avg_sq, count, scalars, rounding_seed, first_element, amax);
    } else {
      NVFP4LM_LAUNCH(adamw_vec4_kernel<false>, grid, kThreads, 0)
      (master, grad, exp_avg, exp_avg_sq, count, scalars, rounding_seed, first_element, amax);
    }
    NVFP4LM_CUDA_CHECK_LAUNCH();
    return;
  }
  const unsigned grid = grid_stride_blocks(count, kThreads, kMaxUpdateBlocks);
  if (master_bf16) {
    NVFP4LM_LAUNCH(adamw_kernel<true>, grid, kThreads, 0)
    (master, grad, exp_avg, exp_avg_sq, count, scalars, rounding_seed, first_element, amax);
  } else {
    NVFP4LM_LAUNCH(adamw_kernel<false>, grid, kThreads, 0)
    (master, grad, exp_avg, exp_avg_sq, count, scalars, rounding_seed, first_element, amax);
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

void adamw8bit_step(void* master, bool master_bf16, const float* grad, const Moments8bit& moments, int64_t count,
                    const AdamWScalars& scalars, const Rounding8bitSeeds& seeds, uint64_t first_element,
                    AmaxAccumulator* amax) {
  if (count <= 0) return;
  MomentTables tables;
  std::memcpy(tables.signed_magnitude, signed_magnitude_table(), sizeof(tables.signed_magnitude));
  std::memcpy(tables.unsigned_values, unsigned_table(), sizeof(tables.unsigned_values));
  const int64_t blocks = moment_block_count(count);
  const unsigned grid = grid_stride_blocks(blocks, 1, kMaxUpdateBlocks);  // one moment block per CTA and iteration
  if (master_bf16) {
    NVFP4LM_LAUNCH(adamw8bit_kernel<true>, grid, kMomentBlock, 0)
    (master, grad, moments, count, blocks, scalars, seeds, first_element, amax, tables);
  } else {
    NVFP4LM_LAUNCH(adamw8bit_kernel<false>, grid, kMomentBlock, 0)
    (master, grad, moments, count, blocks, scalars, seeds, first_element, amax, tables);
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

int64_t sum_of_squares_partial_count(int64_t count) { return count <= 0 ? 0 : (count + kSumTile - 1) / kSumTile; }

void sum_of_squares_partials(const float* data, int64_t count, double* partials) {
  const int64_t tiles = sum_of_squares_partial_count(count);
  if (tiles == 0) return;
  // One CTA per tile (the tile, not the grid, fixes the summation order); 2^31 - 1 tiles are 3.5e13 elements.
  NVFP4LM_LAUNCH(sum_of_squares_partial_kernel, static_cast<unsigned>(tiles), kSumThreads, 0)(data, count, partials);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

double sum_of_squares_total(const double* partials, int64_t count, double* total) {
  cudaStream_t s = stream();
  NVFP4LM_LAUNCH(sum_of_squares_total_kernel, 1, kTotalThreads, 0)(partials, std::max<int64_t>(count, 0), total);
  NVFP4LM_CUDA_CHECK_LAUNCH();
  double host = 0.0;
  NVFP4LM_CUDA_CHECK(cudaMemcpyAsync(&host, total, sizeof(double), cudaMemcpyDeviceToHost, s));
  NVFP4LM_CUDA_CHECK(cudaStreamSynchronize(s));
  return host;
}

void scale_in_place(float* data, int64_t count, float factor) {
  if (count <= 0) return;
  NVFP4LM_LAUNCH(scale_kernel, grid_stride_blocks(count, kThreads), kThreads, 0)(data, count, factor);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
