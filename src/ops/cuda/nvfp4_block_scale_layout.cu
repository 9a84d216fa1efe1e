// nvfp4_lay_out_block_scales (ops/cuda/nvfp4_w4a4_cublaslt.h): one thread per byte of the laid-out scales, grid-stride;
// each finds the (row, block column) its byte holds by inverting ops/cuda/nvfp4_block_scale_layout.h's offset, and
// writes that scale or, in the padding, zero.
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "ops/cuda/kernel_common.cuh"
#include "ops/cuda/nvfp4_block_scale_layout.h"
#include "ops/cuda/nvfp4_w4a4_cublaslt.h"

namespace nvfp4lm::cuda {
namespace {

using namespace kernels;

constexpr int kThreads = 256;

__global__ void lay_out_kernel(const uint8_t* scales, int64_t rows, int64_t k_blocks, int64_t column_tiles,
                               int64_t total, uint8_t* out) {
  for (int64_t offset = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; offset < total;
       offset += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t tile = offset / kScaleTileBytes, within = offset % kScaleTileBytes;
    // within = (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4
    const int64_t r = (tile / column_tiles) * kScaleTileRows + ((within / 4) % 4) * 32 + within / 16;
    const int64_t c = (tile % column_tiles) * kScaleTileColumns + within % 4;
    out[offset] = r < rows && c < k_blocks ? scales[r * k_blocks + c] : uint8_t{0};
  }
}

}  // namespace

void nvfp4_lay_out_block_scales(const uint8_t* scales, int64_t rows, int64_t k, uint8_t* out) {
  const int64_t k_blocks = k / 16, total = block_scale_layout_bytes(rows, k_blocks);
  if (total == 0) return;
  NVFP4LM_LAUNCH(lay_out_kernel, grid_stride_blocks(total, kThreads), kThreads, 0)
  (scales, rows, k_blocks, padded_scale_columns(k_blocks) / kScaleTileColumns, total, out);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
