// CUDA elementwise ops (see elementwise.h). One grid-stride kernel per op over the [rows, ceil(width / 8)] chunks
// of the operands, templated on the element type only (F32 / BF16 / F16; cast on both types).
#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/reduce.cuh"
#include "core/rng.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/kernel_common.cuh"

namespace nvfp4lm::cuda {
namespace {

using namespace kernels;

constexpr int kThreads = 256;
constexpr int kSumBlocks = 1024;

#define NVFP4LM_GRID_STRIDE(item, items)                                                           \
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; item < (items); \
       item += static_cast<int64_t>(gridDim.x) * blockDim.x)

// The two-operand ops: out = a + b, out = a * b (in fp32, rounded once to T).
enum class Binary { Add, Mul };

template <typename T, Binary op>
__global__ void binary_kernel(DeviceRows a, DeviceRows b, DeviceRows out, int64_t chunks_per_row, int64_t items,
                              bool vec) {
  NVFP4LM_GRID_STRIDE(item, items) {
    const ChunkPosition p = chunk_position(item, chunks_per_row);
    float x[kChunk], y[kChunk];
    load_chunk(row_ptr<const T>(a, p.row), p.col, a.width, vec, x);
    load_chunk(row_ptr<const T>(b, p.row), p.col, a.width, vec, y);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) x[k] = op == Binary::Add ? x[k] + y[k] : x[k] * y[k];
    store_chunk(row_ptr<T>(out, p.row), p.col, a.width, vec, x);
  }
}

template <typename T>
__global__ void scale_kernel(DeviceRows a, float s, int64_t chunks_per_row, int64_t items, bool vec) {
  NVFP4LM_GRID_STRIDE(item, items) {
    const ChunkPosition p = chunk_position(item, chunks_per_row);
    float x[kChunk];
    T* row = row_ptr<T>(a, p.row);
    load_chunk(row, p.col, a.width, vec, x);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) x[k] *= s;
    store_chunk(row, p.col, a.width, vec, x);
  }
}

template <typename T>
__global__ void fill_kernel(DeviceRows a, float value, int64_t chunks_per_row, int64_t items, bool vec) {
  float x[kChunk];
#pragma unroll
  for (int k = 0; k < kChunk; ++k) x[k] = value;
  NVFP4LM_GRID_STRIDE(item, items) {
    const ChunkPosition p = chunk_position(item, chunks_per_row);
    store_chunk(row_ptr<T>(a, p.row), p.col, a.width, vec, x);
  }
}

// The chunk's elements are (row, col + k); the mask index is the logical row-major position, so a flattened dense
// operand (one row) and the same operand as rows give the same mask.
template <typename T>
__global__ void dropout_kernel(DeviceRows src, DeviceRows dst, float p, uint64_t seed, int64_t mask_width,
                               int64_t chunks_per_row, int64_t items, bool vec, bool accumulate) {
  const float keep_scale = 1.0f / (1.0f - p);
  NVFP4LM_GRID_STRIDE(item, items) {
    const ChunkPosition pos = chunk_position(item, chunks_per_row);
    float x[kChunk], y[kChunk];
    load_chunk(row_ptr<const T>(src, pos.row), pos.col, src.width, vec, x);
    if (accumulate) load_chunk(row_ptr<const T>(dst, pos.row), pos.col, src.width, vec, y);
    const int64_t base = pos.row * mask_width + pos.col;
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      const float kept = counter_uniform(seed, static_cast<uint64_t>(base + k)) >= p ? x[k] * keep_scale : 0.0f;
      y[k] = accumulate ? y[k] + kept : kept;
    }
    store_chunk(row_ptr<T>(dst, pos.row), pos.col, src.width, vec, y);
  }
}

template <typename Src, typename Dst>
__global__ void cast_kernel(DeviceRows src, DeviceRows dst, int64_t chunks_per_row, int64_t items, bool vec) {
  NVFP4LM_GRID_STRIDE(item, items) {
    const ChunkPosition p = chunk_position(item, chunks_per_row);
    float x[kChunk];
    load_chunk(row_ptr<const Src>(src, p.row), p.col, src.width, vec, x);
    store_chunk(row_ptr<Dst>(dst, p.row), p.col, src.width, vec, x);
  }
}

template <typename T>
__global__ void sum_squares_kernel(DeviceRows a, int64_t chunks_per_row, int64_t items, bool vec, double* partial) {
  NVFP4LM_SHARED(double[32], scratch);
  double acc = 0.0;
  NVFP4LM_GRID_STRIDE(item, items) {
    const ChunkPosition p = chunk_position(item, chunks_per_row);
    float x[kChunk];
    load_chunk(row_ptr<const T>(a, p.row), p.col, a.width, vec, x);
    float chunk = 0.f;
#pragma unroll
    for (int k = 0; k < kChunk; ++k) chunk += x[k] * x[k];
    acc += chunk;
  }
  const double total = block_sum(acc, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void sum_partials_kernel(const double* partial, int count, double* out) {
  NVFP4LM_SHARED(double[32], scratch);
  double acc = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x)) acc += partial[i];
  const double total = block_sum(acc, scratch);
  if (threadIdx.x == 0) *out = total;
}

// Calls f(T{}) for the element type of `dtype`.
template <typename F>
void with_float_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32:
      f(float{});
      return;
    case DType::BF16:
      f(bf16{});
      return;
    case DType::F16:
      f(f16{});
      return;
    default:
      fail(cudaErrorInvalidValue, "elementwise op on a non-float dtype", __FILE__, __LINE__);
  }
}

struct Launch {
  int64_t chunks_per_row = 0;
  int64_t items = 0;
  unsigned blocks = 1;
};

Launch launch_for(const DeviceRows& rows) {
  Launch launch;
  launch.chunks_per_row = ceil_div(rows.width, kChunk);
  launch.items = rows.count * launch.chunks_per_row;
  launch.blocks = grid_stride_blocks(launch.items, kThreads);
  return launch;
}

// An op on one operand, flattened: launch_kernel(T{}, rows, launch, vec) launches its kernel for the element type T.
template <typename LaunchKernel>
void in_place(const DeviceRows& a_in, LaunchKernel&& launch_kernel) {
  const DeviceRows a = flattened(a_in);
  const Launch launch = launch_for(a);
  if (launch.items == 0) return;
  const bool vec = vectorizable(a);
  with_float_type(a.dtype, [&](auto tag) { launch_kernel(tag, a, launch, vec); });
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

template <Binary op>
void binary(const DeviceRows& a_in, const DeviceRows& b_in, const DeviceRows& out_in) {
  const bool dense = a_in.dense() && b_in.dense() && out_in.dense();
  const DeviceRows a = dense ? flattened(a_in) : a_in, b = dense ? flattened(b_in) : b_in;
  const DeviceRows out = dense ? flattened(out_in) : out_in;
  const Launch launch = launch_for(a);
  if (launch.items == 0) return;
  const bool vec = vectorizable(a) && vectorizable(b) && vectorizable(out);
  with_float_type(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    NVFP4LM_LAUNCH((binary_kernel<T, op>), launch.blocks, kThreads, 0)
    (a, b, out, launch.chunks_per_row, launch.items, vec);
  });
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void add(const DeviceRows& a, const DeviceRows& b, const DeviceRows& out) { binary<Binary::Add>(a, b, out); }

void mul(const DeviceRows& a, const DeviceRows& b, const DeviceRows& out) { binary<Binary::Mul>(a, b, out); }

void scale(const DeviceRows& a_in, float s) {
  in_place(a_in, [&](auto tag, const DeviceRows& a, const Launch& launch, bool vec) {
    NVFP4LM_LAUNCH(scale_kernel<decltype(tag)>, launch.blocks, kThreads, 0)
    (a, s, launch.chunks_per_row, launch.items, vec);
  });
}

void fill(const DeviceRows& a_in, float value) {
  in_place(a_in, [&](auto tag, const DeviceRows& a, const Launch& launch, bool vec) {
    NVFP4LM_LAUNCH(fill_kernel<decltype(tag)>, launch.blocks, kThreads, 0)
    (a, value, launch.chunks_per_row, launch.items, vec);
  });
}

void cast(const DeviceRows& src_in, const DeviceRows& dst_in) {
  const bool dense = src_in.dense() && dst_in.dense();
  const DeviceRows src = dense ? flattened(src_in) : src_in, dst = dense ? flattened(dst_in) : dst_in;
  const Launch launch = launch_for(src);
  if (launch.items == 0) return;
  const bool vec = vectorizable(src) && vectorizable(dst);
  with_float_type(src.dtype, [&](auto src_tag) {
    with_float_type(dst.dtype, [&](auto dst_tag) {
      using Src = decltype(src_tag);
      using Dst = decltype(dst_tag);
      NVFP4LM_LAUNCH((cast_kernel<Src, Dst>), launch.blocks, kThreads, 0)
      (src, dst, launch.chunks_per_row, launch.items, vec);
    });
  });
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

void dropout(const DeviceRows& src_in, const DeviceRows& dst_in, float p, uint64_t seed, bool accumulate) {
  const bool dense = src_in.dense() && dst_in.dense();
  const DeviceRows src = dense ? flattened(src_in) : src_in, dst = dense ? flattened(dst_in) : dst_in;
  const Launch launch = launch_for(src);
  if (launch.items == 0) return;
  const bool vec = vectorizable(src) && vectorizable(dst);
  with_float_type(src.dtype, [&](auto tag) {
    using T = decltype(tag);
    NVFP4LM_LAUNCH(dropout_kernel<T>, launch.blocks, kThreads, 0)
    (src, dst, p, seed, src.width, launch.chunks_per_row, launch.items, vec, accumulate);
  });
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

size_t sum_squares_scratch_bytes() { return (kSumBlocks + 1) * sizeof(double); }

double sum_squares(const DeviceRows& a_in, void* scratch) {
  const DeviceRows a = flattened(a_in);
  const Launch launch = launch_for(a);
  if (launch.items == 0) return 0.0;
  const bool vec = vectorizable(a);
  // The block count depends on the element count only, so the summation order is fixed for a given shape.
  const auto blocks = static_cast<int>(std::min<int64_t>(kSumBlocks, ceil_div(launch.items, kThreads * 4)));
  auto* partial = static_cast<double*>(scratch);
  double* total = partial + kSumBlocks;
  with_float_type(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    NVFP4LM_LAUNCH(sum_squares_kernel<T>, blocks, kThreads, 0)(a, launch.chunks_per_row, launch.items, vec, partial);
  });
  NVFP4LM_CUDA_CHECK_LAUNCH();
  NVFP4LM_LAUNCH(sum_partials_kernel, 1, 1024, 0)(partial, blocks, total);
  NVFP4LM_CUDA_CHECK_LAUNCH();
  double result = 0.0;
  copy(&result, false, total, true, sizeof(double));
  return result;
}

}  // namespace nvfp4lm::cuda
