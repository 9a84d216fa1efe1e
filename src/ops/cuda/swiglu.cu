// CUDA SwiGLU (see swiglu.h): one grid-stride kernel per direction over 8-element chunks of the rows.
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "ops/cuda/kernel_common.cuh"
#include "ops/cuda/swiglu.h"
#include "ops/cuda/swiglu_math.cuh"

namespace nvfp4lm::cuda {
namespace {

using namespace kernels;

constexpr int kThreads = 256;

template <typename T>
__global__ void swiglu_forward_kernel(DeviceRows gate, DeviceRows up, DeviceRows out, int64_t chunks_per_row,
                                      int64_t items, bool vec) {
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; item < items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const ChunkPosition p = chunk_position(item, chunks_per_row);
    float g[kChunk], u[kChunk];
    load_chunk(row_ptr<const T>(gate, p.row), p.col, gate.width, vec, g);
    load_chunk(row_ptr<const T>(up, p.row), p.col, gate.width, vec, u);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) g[k] = swiglu_value(g[k], u[k]);
    store_chunk(row_ptr<T>(out, p.row), p.col, gate.width, vec, g);
  }
}

template <typename T>
__global__ void swiglu_backward_kernel(DeviceRows dout, DeviceRows gate, DeviceRows up, DeviceRows dgate,
                                       DeviceRows dup, int64_t chunks_per_row, int64_t items, bool vec) {
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; item < items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const ChunkPosition p = chunk_position(item, chunks_per_row);
    float d[kChunk], g[kChunk], u[kChunk];
    load_chunk(row_ptr<const T>(dout, p.row), p.col, gate.width, vec, d);
    load_chunk(row_ptr<const T>(gate, p.row), p.col, gate.width, vec, g);
    load_chunk(row_ptr<const T>(up, p.row), p.col, gate.width, vec, u);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      float dgate, dup;
      swiglu_gradients(d[k], g[k], u[k], dgate, dup);
      g[k] = dgate;
      u[k] = dup;
    }
    store_chunk(row_ptr<T>(dgate, p.row), p.col, gate.width, vec, g);
    store_chunk(row_ptr<T>(dup, p.row), p.col, gate.width, vec, u);
  }
}

}  // namespace

void swiglu_forward(const DeviceRows& gate_in, const DeviceRows& up_in, const DeviceRows& out_in) {
  const bool dense = gate_in.dense() && up_in.dense() && out_in.dense();
  const DeviceRows gate = dense ? flattened(gate_in) : gate_in, up = dense ? flattened(up_in) : up_in;
  const DeviceRows out = dense ? flattened(out_in) : out_in;
  const int64_t chunks_per_row = ceil_div(gate.width, kChunk), items = gate.count * chunks_per_row;
  if (items == 0) return;
  const bool vec = vectorizable(gate) && vectorizable(up) && vectorizable(out);
  const unsigned blocks = grid_stride_blocks(items, kThreads);
  if (gate.dtype == DType::F32) {
    NVFP4LM_LAUNCH(swiglu_forward_kernel<float>, blocks, kThreads, 0)(gate, up, out, chunks_per_row, items, vec);
  } else if (gate.dtype == DType::BF16) {
    NVFP4LM_LAUNCH(swiglu_forward_kernel<bf16>, blocks, kThreads, 0)(gate, up, out, chunks_per_row, items, vec);
  } else {
    fail(cudaErrorInvalidValue, "swiglu on a dtype other than F32 / BF16", __FILE__, __LINE__);
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

void swiglu_backward(const DeviceRows& dout_in, const DeviceRows& gate_in, const DeviceRows& up_in,
                     const DeviceRows& dgate_in, const DeviceRows& dup_in) {
  const bool dense = dout_in.dense() && gate_in.dense() && up_in.dense() && dgate_in.dense() && dup_in.dense();
  auto view = [dense](const DeviceRows& rows) { return dense ? flattened(rows) : rows; };
  const DeviceRows dout = view(dout_in), gate = view(gate_in), up = view(up_in), dgate = view(dgate_in),
                   dup = view(dup_in);
  const int64_t chunks_per_row = ceil_div(gate.width, kChunk), items = gate.count * chunks_per_row;
  if (items == 0) return;
  const bool vec =
      vectorizable(dout) && vectorizable(gate) && vectorizable(up) && vectorizable(dgate) && vectorizable(dup);
  const unsigned blocks = grid_stride_blocks(items, kThreads);
  if (gate.dtype == DType::F32) {
    NVFP4LM_LAUNCH(swiglu_backward_kernel<float>, blocks, kThreads, 0)
    (dout, gate, up, dgate, dup, chunks_per_row, items, vec);
  } else if (gate.dtype == DType::BF16) {
    NVFP4LM_LAUNCH(swiglu_backward_kernel<bf16>, blocks, kThreads, 0)
    (dout, gate, up, dgate, dup, chunks_per_row, items, vec);
  } else {
    fail(cudaErrorInvalidValue, "swiglu on a dtype other than F32 / BF16", __FILE__, __LINE__);
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
