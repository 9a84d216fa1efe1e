// CUDA RMSNorm forward and backward (see rmsnorm.h for the math and the reduction scheme).
#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/reduce.cuh"
#include "ops/cuda/kernel_common.cuh"
#include "ops/cuda/rmsnorm.h"

namespace nvfp4lm::cuda {
namespace {

using namespace kernels;

constexpr int kThreads = 256;
// Shared memory for the per-worker dweight partials of one backward block (beyond 48 KiB needs an opt-in).
constexpr int64_t kPartialBudgetBytes = 40 << 10;
constexpr int64_t kRowsPerWorker = 4;  // rows a backward worker handles at least, on average
constexpr int64_t kMaxBackwardBlocks = 1024;

// Lanes per row: the smallest power of two >= the row's chunk count, at most a warp.
int lanes_per_row(int64_t width) {
  const int64_t chunks = ceil_div(width, kChunk);
  int lanes = 1;
  while (lanes < 32 && lanes < chunks) lanes *= 2;
  return lanes;
}

bool weight_vectorizable(const float* weight, int64_t width) {
  return width % kChunk == 0 && reinterpret_cast<uintptr_t>(weight) % 16 == 0;
}

// ---- forward --------------------------------------------------------------------------------------------------

template <typename T>
__global__ void __launch_bounds__(kThreads) rmsnorm_forward_kernel(DeviceRows x, const float* weight, float eps,
                                                                   DeviceRows y, float* rstd, int lanes, bool vec) {
  const int groups = static_cast<int>(blockDim.x) / lanes;
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * groups + static_cast<int>(threadIdx.x) / lanes;
  if (row >= x.count) return;  // whole groups leave together, so the group shuffles below stay complete
  const unsigned mask = group_mask(lanes);
  const int64_t width = x.width;
  const T* xr = row_ptr<const T>(x, row);
  float sum_squares = 0.f;
  for (int64_t col = int64_t{lane} * kChunk; col < width; col += int64_t{lanes} * kChunk) {
    float v[kChunk];
    load_chunk(xr, col, width, vec, v);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) sum_squares += v[k] * v[k];
  }
  sum_squares = group_sum(sum_squares, lanes, mask);
  const float inv = 1.f / sqrtf(sum_squares / static_cast<float>(width) + eps);
  if (rstd != nullptr && lane == 0) rstd[row] = inv;
  T* yr = row_ptr<T>(y, row);
  for (int64_t col = int64_t{lane} * kChunk; col < width; col += int64_t{lanes} * kChunk) {
    float v[kChunk], w[kChunk];
    load_chunk(xr, col, width, vec, v);
    load_chunk(weight, col, width, vec, w);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) v[k] = (v[k] * inv) * w[k];
    store_chunk(yr, col, width, vec, v);  // the lane read this chunk of x above: y may alias x
  }
}

// The same sums in the same order as rmsnorm_forward_kernel (a lane's chunks lane, lane + lanes, ... ascending, their
// elements in order, then the group's shuffle tree), for BF16 rows of at most kMaxPreloadedChunks chunks a lane, with
// every chunk of the row loaded before the first is summed: one round trip to memory for x instead of one a chunk
// (a decode step's row of 2560 is 10 chunks a lane, and its norm was ten dependent trips long).
constexpr int kMaxPreloadedChunks = 16;

__global__ void __launch_bounds__(kThreads)
    rmsnorm_forward_preloaded_kernel(DeviceRows x, const float* __restrict__ weight, float eps, DeviceRows y,
                                     float* rstd, int lanes) {
  const int groups = static_cast<int>(blockDim.x) / lanes;
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * groups + static_cast<int>(threadIdx.x) / lanes;
  if (row >= x.count) return;  // whole groups leave together, so the group shuffles below stay complete
  const unsigned mask = group_mask(lanes);
  const int64_t width = x.width;
  const bf16* xr = row_ptr<const bf16>(x, row);
  uint4 raw[kMaxPreloadedChunks];
#pragma unroll
  for (int j = 0; j < kMaxPreloadedChunks; ++j) {
    const int64_t col = (int64_t{lane} + int64_t{j} * lanes) * kChunk;
    raw[j] = col < width ? *reinterpret_cast<const uint4*>(xr + col) : make_uint4(0, 0, 0, 0);
  }
  float sum_squares = 0.f;
#pragma unroll
  for (int j = 0; j < kMaxPreloadedChunks; ++j) {
    if ((int64_t{lane} + int64_t{j} * lanes) * kChunk >= width) break;
    const bf16* v = reinterpret_cast<const bf16*>(&raw[j]);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) sum_squares += to_float(v[k]) * to_float(v[k]);
  }
  sum_squares = group_sum(sum_squares, lanes, mask);
  const float inv = 1.f / sqrtf(sum_squares / static_cast<float>(width) + eps);
  if (rstd != nullptr && lane == 0) rstd[row] = inv;
  bf16* yr = row_ptr<bf16>(y, row);
#pragma unroll
  for (int j = 0; j < kMaxPreloadedChunks; ++j) {
    const int64_t col = (int64_t{lane} + int64_t{j} * lanes) * kChunk;
    if (col >= width) break;
    float v[kChunk], w[kChunk];
    const bf16* elements = reinterpret_cast<const bf16*>(&raw[j]);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) v[k] = to_float(elements[k]);
    load_chunk(weight, col, width, true, w);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) v[k] = (v[k] * inv) * w[k];
    store_chunk(yr, col, width, true, v);  // x was read above in full: y may alias x
  }
}

// ---- backward -------------------------------------------------------------------------------------------------

struct BackwardPlan {
  int lanes = 1;
  int workers = 1;  // row groups per block
  int64_t rows_per_block = 0;
  int64_t blocks = 0;
  size_t shared_bytes = 0;
};

BackwardPlan backward_plan(int64_t rows, int64_t width) {
  BackwardPlan plan;
  plan.lanes = lanes_per_row(width);
  const int64_t row_bytes = std::max<int64_t>(ceil_div(width, kChunk), 1) * kChunk * 4;  // padded to whole chunks
  plan.workers = static_cast<int>(std::clamp<int64_t>(kPartialBudgetBytes / row_bytes, 1, kThreads / plan.lanes));
  if (rows == 0) return plan;
  const int64_t wanted = std::clamp<int64_t>(ceil_div(rows, plan.workers * kRowsPerWorker), 1, kMaxBackwardBlocks);
  plan.rows_per_block = ceil_div(rows, wanted);
  plan.blocks = ceil_div(rows, plan.rows_per_block);
  plan.shared_bytes = static_cast<size_t>(plan.workers) * static_cast<size_t>(row_bytes);
  return plan;
}

// Stage 1: block b handles rows [b * rows_per_block, ...); worker w of the block takes every workers-th row of
// that range and accumulates dy * x * r into its own shared row of partials (lanes own columns: no races). The
// block then adds its workers' partials in order and writes them to block_sums[b]. A worker's partials are stored
// element-of-chunk major (column c * 8 + k at k * chunks + c), so the lanes of a group, which own consecutive
// chunks, hit consecutive banks.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_backward_kernel(DeviceRows dy, DeviceRows x, const float* weight, const float* rstd, DeviceRows dx,
                            float* block_sums, int64_t rows_per_block, int lanes, bool vec) {
  NVFP4LM_DYNAMIC_SHARED(float, partial);  // [workers][8][chunks]
  const int64_t width = x.width;
  const int workers = static_cast<int>(blockDim.x) / lanes;
  const int worker = static_cast<int>(threadIdx.x) / lanes, lane = static_cast<int>(threadIdx.x) % lanes;
  const int64_t chunks = (width + kChunk - 1) / kChunk, stride = chunks * kChunk;
  for (int64_t i = threadIdx.x; i < workers * stride; i += blockDim.x) partial[i] = 0.f;
  __syncthreads();

  const unsigned mask = group_mask(lanes);
  const float inv_width = 1.f / static_cast<float>(width);
  float* mine = partial + worker * stride;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int64_t last = min(first + rows_per_block, x.count);
  for (int64_t row = first + worker; row < last; row += workers) {
    const T* dyr = row_ptr<const T>(dy, row);
    const T* xr = row_ptr<const T>(x, row);
    const float inv = rstd[row];
    float dot = 0.f;
    for (int64_t col = int64_t{lane} * kChunk; col < width; col += int64_t{lanes} * kChunk) {
      float g[kChunk], v[kChunk], w[kChunk];
      load_chunk(dyr, col, width, vec, g);
      load_chunk(xr, col, width, vec, v);
      load_chunk(weight, col, width, vec, w);
#pragma unroll
      for (int k = 0; k < kChunk; ++k) dot += g[k] * w[k] * v[k];
    }
    dot = group_sum(dot, lanes, mask);
    const float coeff = inv * inv * inv * dot * inv_width;
    T* dxr = row_ptr<T>(dx, row);
    for (int64_t col = int64_t{lane} * kChunk; col < width; col += int64_t{lanes} * kChunk) {
      float g[kChunk], v[kChunk], w[kChunk], out[kChunk];
      load_chunk(dyr, col, width, vec, g);
      load_chunk(xr, col, width, vec, v);
      load_chunk(weight, col, width, vec, w);
#pragma unroll
      for (int k = 0; k < kChunk; ++k) {
        out[k] = inv * g[k] * w[k] - coeff * v[k];
        mine[k * chunks + col / kChunk] += g[k] * v[k] * inv;  // 0 past the row end (g, v read as 0)
      }
      store_chunk(dxr, col, width, vec, out);  // dy of this chunk was read above: dx may alias dy
    }
  }
  __syncthreads();
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    float sum = 0.f;
    const int64_t slot = (j % kChunk) * chunks + j / kChunk;
    for (int w = 0; w < workers; ++w) sum += partial[w * stride + slot];
    block_sums[blockIdx.x * width + j] = sum;
  }
}

// Stage 2: dweight[j] += sum over blocks, in block order.
__global__ void rmsnorm_dweight_kernel(const float* block_sums, int64_t blocks, int64_t width, float* dweight) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < width;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.f;
    for (int64_t b = 0; b < blocks; ++b) sum += block_sums[b * width + j];
    dweight[j] += sum;
  }
}

template <typename F>
void with_activation_type(DType dtype, F&& f) {
  if (dtype == DType::F32) {
    f(float{});
  } else if (dtype == DType::BF16) {
    f(bf16{});
  } else {
    fail(cudaErrorInvalidValue, "rmsnorm on a dtype other than F32 / BF16", __FILE__, __LINE__);
  }
}

}  // namespace

void rmsnorm_forward(const DeviceRows& x, const float* weight, float eps, const DeviceRows& y, float* rstd) {
  if (x.count == 0) return;
  const int lanes = lanes_per_row(x.width);
  const int64_t rows_per_block = kThreads / lanes;
  const auto blocks = static_cast<unsigned>(ceil_div(x.count, rows_per_block));
  const bool vec = vectorizable(x) && vectorizable(y) && weight_vectorizable(weight, x.width);
  if (vec && x.dtype == DType::BF16 && ceil_div(ceil_div(x.width, kChunk), lanes) <= kMaxPreloadedChunks) {
    NVFP4LM_LAUNCH(rmsnorm_forward_preloaded_kernel, blocks, kThreads, 0)(x, weight, eps, y, rstd, lanes);
    NVFP4LM_CUDA_CHECK_LAUNCH();
    return;
  }
  with_activation_type(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    NVFP4LM_LAUNCH(rmsnorm_forward_kernel<T>, blocks, kThreads, 0)(x, weight, eps, y, rstd, lanes, vec);
  });
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

size_t rmsnorm_backward_scratch_bytes(int64_t rows, int64_t width) {
  const BackwardPlan plan = backward_plan(rows, width);
  return static_cast<size_t>(plan.blocks * width) * sizeof(float);
}

void rmsnorm_backward(const DeviceRows& dy, const DeviceRows& x, const float* weight, const float* rstd,
                      const DeviceRows& dx, float* dweight, void* scratch) {
  if (x.count == 0 || x.width == 0) return;
  const BackwardPlan plan = backward_plan(x.count, x.width);
  const bool vec = vectorizable(dy) && vectorizable(x) && vectorizable(dx) && weight_vectorizable(weight, x.width);
  auto* block_sums = static_cast<float*>(scratch);
  const int threads = plan.workers * plan.lanes;
  with_activation_type(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (plan.shared_bytes > (48u << 10)) {
      NVFP4LM_CUDA_CHECK(cudaFuncSetAttribute(rmsnorm_backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(plan.shared_bytes)));
    }
    NVFP4LM_LAUNCH(rmsnorm_backward_kernel<T>, static_cast<unsigned>(plan.blocks), threads, plan.shared_bytes)
    (dy, x, weight, rstd, dx, block_sums, plan.rows_per_block, plan.lanes, vec);
  });
  NVFP4LM_CUDA_CHECK_LAUNCH();
  const int finish_threads = 256;
  const unsigned finish_blocks = grid_stride_blocks(x.width, finish_threads);
  NVFP4LM_LAUNCH(rmsnorm_dweight_kernel, finish_blocks, finish_threads, 0)(block_sums, plan.blocks, x.width, dweight);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
