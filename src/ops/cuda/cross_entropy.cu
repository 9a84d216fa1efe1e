// Kernels of the CUDA fused cross-entropy (see cross_entropy.h). cross_entropy_rows: one block per logits row,
// two passes over it (the second one hits L2 for most of the ~300 KB row): an online max / sum-exp / argmax in
// fp32, then dlogits written in place. Block reductions are fixed trees, so results are reproducible.
#include <climits>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/reduce.cuh"
#include "ops/cuda/cross_entropy.h"
#include "ops/cuda/kernel_common.cuh"

namespace nvfp4lm::cuda {
namespace {

using namespace kernels;

constexpr int kRowThreads = 512;
constexpr int kRowWarps = kRowThreads / 32;

// Running softmax statistics of a set of logits: max, sum of exp(z - max), and the first maximal index.
struct RowStats {
  float max;
  float sum;
  int index;
};

__device__ __forceinline__ RowStats merge(RowStats a, RowStats b) {
  RowStats out;
  out.max = fmaxf(a.max, b.max);
  const float sa = a.max == -INFINITY ? 0.f : a.sum * __expf(a.max - out.max);
  const float sb = b.max == -INFINITY ? 0.f : b.sum * __expf(b.max - out.max);
  out.sum = sa + sb;
  // The first maximal index wins ties (torch.argmax); NaN values never compare greater.
  out.index = (b.max > a.max || (b.max == a.max && b.index < a.index)) ? b.index : a.index;
  return out;
}

__device__ __forceinline__ RowStats shuffle_xor(const RowStats& s, int offset) {
  return {__shfl_xor_sync(kFullMask, s.max, offset), __shfl_xor_sync(kFullMask, s.sum, offset),
          __shfl_xor_sync(kFullMask, s.index, offset)};
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    cross_entropy_rows_kernel(T* logits, int64_t vocab, int64_t ld, const int32_t* targets, float grad_scale,
                              const float* row_scales, bool want_grad, float* row_loss, int32_t* row_correct) {
  NVFP4LM_SHARED(RowStats[kRowWarps], warp_stats);
  NVFP4LM_SHARED(float, shared_lse);
  T* z = logits + static_cast<int64_t>(blockIdx.x) * ld;
  const int32_t target = targets[blockIdx.x];

  // Pass 1: per-thread online statistics over the thread's chunks (indices ascending within a thread).
  RowStats stats{-INFINITY, 0.f, INT_MAX};
  for (int64_t col = int64_t{threadIdx.x} * kChunk; col < vocab; col += int64_t{kRowThreads} * kChunk) {
    float v[kChunk];
    load_chunk(z, col, ld, true, v);  // rows are padded to ld (a multiple of 8): the chunk is in bounds
    float chunk_max = -INFINITY;
    int chunk_index = INT_MAX;
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      if (col + k < vocab && v[k] > chunk_max) {
        chunk_max = v[k];
        chunk_index = static_cast<int>(col + k);
      }
    }
    if (chunk_max > stats.max) {
      stats.sum = stats.max == -INFINITY ? 0.f : stats.sum * __expf(stats.max - chunk_max);
      stats.max = chunk_max;
      stats.index = chunk_index;
    }
    if (stats.max != -INFINITY) {
#pragma unroll
      for (int k = 0; k < kChunk; ++k)
        if (col + k < vocab) stats.sum += __expf(v[k] - stats.max);
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) stats = merge(stats, shuffle_xor(stats, offset));
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  if (lane == 0) warp_stats[warp] = stats;
  __syncthreads();
  if (warp == 0) {
    stats = lane < kRowWarps ? warp_stats[lane] : RowStats{-INFINITY, 0.f, INT_MAX};
    for (int offset = 16; offset > 0; offset /= 2) stats = merge(stats, shuffle_xor(stats, offset));
    if (lane == 0) {
      const float lse = stats.max + logf(stats.sum);
      shared_lse = lse;
      row_loss[blockIdx.x] = lse - to_float(z[target]);  // read before pass 2 overwrites the row
      row_correct[blockIdx.x] = stats.index == target ? 1 : 0;
    }
  }
  __syncthreads();
  if (!want_grad) return;

  // Pass 2: dlogits = scale * (softmax - onehot), padding columns 0.
  const float lse = shared_lse;
  const float scale = row_scales != nullptr ? grad_scale * row_scales[blockIdx.x] : grad_scale;
  for (int64_t col = int64_t{threadIdx.x} * kChunk; col < ld; col += int64_t{kRowThreads} * kChunk) {
    float v[kChunk];
    load_chunk(z, col, ld, true, v);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      const int64_t j = col + k;
      v[k] = j < vocab ? scale * __expf(v[k] - lse) - (j == target ? scale : 0.f) : 0.f;
    }
    store_chunk(z, col, ld, true, v);
  }
}

__global__ void cross_entropy_sums_kernel(const float* row_loss, const int32_t* row_correct, int64_t rows,
                                          double* sums) {
  NVFP4LM_SHARED(double[32], scratch);
  double loss = 0.0, correct = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    loss += row_loss[i];
    correct += row_correct[i];
  }
  loss = block_sum(loss, scratch);
  correct = block_sum(correct, scratch);
  if (threadIdx.x == 0) {
    sums[0] = loss;
    sums[1] = correct;
  }
}

template <typename T>
__global__ void expand_rows_kernel(DeviceRows src, const int32_t* source_row, DeviceRows dst, int64_t chunks_per_row,
                                   int64_t items, bool vec) {
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; item < items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const ChunkPosition p = chunk_position(item, chunks_per_row);
    const int32_t from = source_row[p.row];
    float v[kChunk];
    if (from >= 0) {
      load_chunk(row_ptr<const T>(src, from), p.col, dst.width, vec, v);
    } else {
#pragma unroll
      for (int k = 0; k < kChunk; ++k) v[k] = 0.f;
    }
    store_chunk(row_ptr<T>(dst, p.row), p.col, dst.width, vec, v);
  }
}

}  // namespace

void cross_entropy_rows(void* logits, DType dtype, int64_t rows, int64_t vocab, const int32_t* targets,
                        float grad_scale, const float* row_scales, bool want_grad, float* row_loss,
                        int32_t* row_correct) {
  if (rows == 0) return;
  const int64_t ld = cross_entropy_logits_ld(vocab);
  const auto blocks = static_cast<unsigned>(rows);
  if (dtype == DType::F32) {
    NVFP4LM_LAUNCH(cross_entropy_rows_kernel<float>, blocks, kRowThreads, 0)
    (static_cast<float*>(logits), vocab, ld, targets, grad_scale, row_scales, want_grad, row_loss, row_correct);
  } else if (dtype == DType::BF16) {
    NVFP4LM_LAUNCH(cross_entropy_rows_kernel<bf16>, blocks, kRowThreads, 0)
    (static_cast<bf16*>(logits), vocab, ld, targets, grad_scale, row_scales, want_grad, row_loss, row_correct);
  } else {
    fail(cudaErrorInvalidValue, "cross-entropy logits of a dtype other than F32 / BF16", __FILE__, __LINE__);
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

void cross_entropy_sums(const float* row_loss, const int32_t* row_correct, int64_t rows, double* sums) {
  NVFP4LM_LAUNCH(cross_entropy_sums_kernel, 1, 1024, 0)(row_loss, row_correct, rows, sums);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

void expand_rows(const DeviceRows& src, const int32_t* source_row, const DeviceRows& dst) {
  const int64_t chunks_per_row = ceil_div(dst.width, kChunk), items = dst.count * chunks_per_row;
  if (items == 0) return;
  const bool vec = vectorizable(src) && vectorizable(dst);
  const unsigned blocks = grid_stride_blocks(items, 256);
  if (dst.dtype == DType::F32) {
    NVFP4LM_LAUNCH(expand_rows_kernel<float>, blocks, 256, 0)(src, source_row, dst, chunks_per_row, items, vec);
  } else if (dst.dtype == DType::BF16) {
    NVFP4LM_LAUNCH(expand_rows_kernel<bf16>, blocks, 256, 0)(src, source_row, dst, chunks_per_row, items, vec);
  } else {
    fail(cudaErrorInvalidValue, "expand_rows on a dtype other than F32 / BF16", __FILE__, __LINE__);
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
