// CUDA RoPE (see rope.h): one thread per (token, head, 8 frequency pairs); the chunk's x1 = x[i..i+8) and
// x2 = x[half + i..half + i + 8) are rotated together, reading the token's cos / sin row in the same chunks.
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "ops/cuda/input_errors.h"
#include "ops/cuda/kernel_common.cuh"
#include "ops/cuda/rope.h"
#include "ops/cuda/rope_math.cuh"

namespace nvfp4lm::cuda {
namespace {

using namespace kernels;

constexpr int kThreads = 256;

template <typename T>
__global__ void rope_kernel(DeviceRows tokens, int64_t heads, int64_t head_dim, const int32_t* positions,
                            const float* cos, const float* sin, int64_t table_rows, float sin_sign,
                            int64_t chunks_per_head, int64_t items, bool vec, unsigned long long* error_slot) {
  const int64_t half = head_dim / 2;
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; item < items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t per_token = heads * chunks_per_head;
    const int64_t token = item / per_token;
    const int64_t rest = item - token * per_token;
    const int64_t head = rest / chunks_per_head;
    const int64_t col = (rest - head * chunks_per_head) * kChunk;
    const int64_t position = positions != nullptr ? positions[token] : token;
    if (position < 0 || position >= table_rows) {
      if (rest == 0) record_input_error(error_slot, token, static_cast<int32_t>(position));
      continue;
    }
    T* x1 = row_ptr<T>(tokens, token) + head * head_dim;
    T* x2 = x1 + half;
    float a[kChunk], b[kChunk], c[kChunk], s[kChunk];
    load_chunk(x1, col, half, vec, a);
    load_chunk(x2, col, half, vec, b);
    load_chunk(cos + position * half, col, half, vec, c);
    load_chunk(sin + position * half, col, half, vec, s);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) rope_rotate_pair(a[k], b[k], c[k], sin_sign * s[k], a[k], b[k]);
    store_chunk(x1, col, half, vec, a);
    store_chunk(x2, col, half, vec, b);
  }
}

}  // namespace

void rope_rotate(const DeviceRows& tokens, int64_t heads, int64_t head_dim, const int32_t* positions, const float* cos,
                 const float* sin, int64_t table_rows, bool inverse) {
  const int64_t half = head_dim / 2;
  const int64_t chunks_per_head = ceil_div(half, kChunk);
  const int64_t items = tokens.count * heads * chunks_per_head;
  if (items == 0) return;
  // Vector loads need every half-row (x1, x2, cos, sin) to start on 16 bytes: half a multiple of 8 elements.
  const bool vec = half % kChunk == 0 && vectorizable(tokens) && reinterpret_cast<uintptr_t>(cos) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(sin) % 16 == 0;
  unsigned long long* error_slot = positions != nullptr ? input_error_slot(InputErrorKind::RopePosition) : nullptr;
  const float sin_sign = inverse ? -1.f : 1.f;
  const unsigned blocks = grid_stride_blocks(items, kThreads);
  if (tokens.dtype == DType::F32) {
    NVFP4LM_LAUNCH(rope_kernel<float>, blocks, kThreads, 0)
    (tokens, heads, head_dim, positions, cos, sin, table_rows, sin_sign, chunks_per_head, items, vec, error_slot);
  } else if (tokens.dtype == DType::BF16) {
    NVFP4LM_LAUNCH(rope_kernel<bf16>, blocks, kThreads, 0)
    (tokens, heads, head_dim, positions, cos, sin, table_rows, sin_sign, chunks_per_head, items, vec, error_slot);
  } else {
    fail(cudaErrorInvalidValue, "rope on a dtype other than F32 / BF16", __FILE__, __LINE__);
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
