// See row_exact_linear.h. Thread f of the grid's x axis owns output feature f (weight row f) for the kRowExactRows
// rows of x of its y block: per 8-element chunk of the inputs it loads the weight chunk once and folds it into each
// row's accumulator, the chunks in increasing order, the products of a chunk in order. Nothing about the other
// rows enters a row's sum, and the vectorised and element-wise loads (chosen per operand by alignment) feed the
// same products in the same order, so the bits of y[n, f] depend on x row n and weight row f only.
// On a GPU the 32 threads of a warp read 32 weight rows 16 bytes at a time (each 32-byte sector serves two
// consecutive chunks through L1) and every thread reads the same x chunk (a broadcast); the y stores of a warp are
// consecutive.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "ops/cuda/kernel_common.cuh"
#include "ops/cuda/row_exact_linear.h"

namespace nvfp4lm::cuda {
namespace {

using namespace kernels;

constexpr int kThreads = 128;
constexpr int kRows = static_cast<int>(kRowExactRows);
constexpr int64_t kMaxRowBlocks = 65535;  // the grid's y limit; more rows loop

template <typename T, typename Out>
__global__ void __launch_bounds__(kThreads)
    row_exact_kernel(DeviceRows x, DeviceRows w, DeviceRows y, bool x_vec, bool w_vec) {
  const int64_t feature = static_cast<int64_t>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (feature >= w.count) return;
  const int64_t width = w.width;
  const T* weight = row_ptr<const T>(w, feature);
  for (int64_t row0 = static_cast<int64_t>(blockIdx.y) * kRows; row0 < x.count;
       row0 += static_cast<int64_t>(gridDim.y) * kRows) {
    const int rows = static_cast<int>(x.count - row0 < kRows ? x.count - row0 : kRows);
    float acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
    for (int64_t col = 0; col < width; col += kChunk) {
      float wv[kChunk];
      load_chunk(weight, col, width, w_vec, wv);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= rows) break;
        float xv[kChunk];
        load_chunk(row_ptr<const T>(x, row0 + r), col, width, x_vec, xv);
#pragma unroll
        for (int k = 0; k < kChunk; ++k) acc[r] = fmaf(xv[k], wv[k], acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= rows) break;
      row_ptr<Out>(y, row0 + r)[feature] = from_float<Out>(acc[r]);
    }
  }
}

template <typename T, typename Out>
void launch(const DeviceRows& x, const DeviceRows& w, const DeviceRows& y) {
  const dim3 grid(static_cast<unsigned>(ceil_div(w.count, kThreads)),
                  static_cast<unsigned>(std::min(ceil_div(x.count, kRows), kMaxRowBlocks)));
  NVFP4LM_LAUNCH((row_exact_kernel<T, Out>), grid, kThreads, 0)(x, w, y, vectorizable(x), vectorizable(w));
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_for_output(const DeviceRows& x, const DeviceRows& w, const DeviceRows& y) {
  if (y.dtype == DType::F32) {
    launch<T, float>(x, w, y);
  } else {
    launch<T, T>(x, w, y);
  }
}

}  // namespace

bool row_exact_linear_supported(DType x_and_w, DType y) {
  const bool input = x_and_w == DType::BF16 || x_and_w == DType::F16 || x_and_w == DType::F32;
  return input && (y == x_and_w || y == DType::F32);
}

void row_exact_linear(const DeviceRows& x, const DeviceRows& w, const DeviceRows& y) {
  if (x.count == 0 || w.count == 0) return;
  switch (x.dtype) {
    case DType::BF16:
      launch_for_output<bf16>(x, w, y);
      break;
    case DType::F16:
      launch_for_output<f16>(x, w, y);
      break;
    default:
      launch_for_output<float>(x, w, y);
      break;
  }
}

}  // namespace nvfp4lm::cuda
