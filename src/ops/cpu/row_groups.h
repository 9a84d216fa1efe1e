// Running a dot-rows kernel (nvfp4_dot_rows, dense_dot_rows: at most kDotMaxRows activation rows a call) over a
// whole linear layer y [N, out] = x [N, in] · wᵀ for any N:
//  - output rows are split into contiguous slices, one per OpenMP thread, when the weight is large enough to be
//    worth a parallel region (below kParallelElements the calling thread does it all: a decode step makes 7
//    small calls per layer, and on a busy machine each region's barrier can cost a scheduler time slice);
//  - within a slice, N > kDotMaxRows runs tile by tile: a tile of output rows that stays in the core's cache
//    meets every group of kDotMaxRows activation rows before the next tile is read, so the weight crosses the
//    memory bus once however many groups there are.
// Each y element is computed by one kernel call for its own x row, so the result of a row does not depend on N.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "ops/cpu/nvfp4_dot.h"
#include "ops/cpu/views.h"

namespace nvfp4lm::cpu {

// Below this many weight elements (~0.56 MB packed NVFP4, ~40 us on one AVX-512 core: 1536 x 512 measures 32 us)
// one thread does the whole layer.
inline constexpr int64_t kParallelElements = int64_t{1} << 20;
// Bytes of weight per tile of output rows when N > kDotMaxRows: half of a 512 KiB L2 (AMD Zen 2 / 3).
inline constexpr int64_t kRowTileBytes = int64_t{256} << 10;

// kernel(first, last, x_rows, y_rows, n): y_rows[r][o] for o in [first, last), r < n <= kDotMaxRows, where x_rows
// holds x_row(i) for the group's n activation rows i: a float row, or what a kernel made of it (an Int8Activations).
template <typename XRow, typename Kernel>
void run_row_groups_of(int64_t n, const XRow& x_row, const MatrixF32& y, int64_t out_rows, int64_t in_cols,
                       int64_t weight_row_bytes, const Kernel& kernel) {
  if (n == 0 || out_rows == 0) return;
  using Row = decltype(x_row(int64_t{0}));
  const int64_t tile = std::max<int64_t>(1, kRowTileBytes / std::max<int64_t>(1, weight_row_bytes));
  auto slice = [&](int64_t begin, int64_t end) {
    std::array<Row, kDotMaxRows> x_rows{};
    std::array<float*, kDotMaxRows> y_rows{};
    const int64_t step = n <= kDotMaxRows ? end - begin : tile;
    for (int64_t first = begin; first < end; first += step) {
      const int64_t last = std::min(end, first + step);
      for (int64_t group = 0; group < n; group += kDotMaxRows) {
        const int count = static_cast<int>(std::min<int64_t>(kDotMaxRows, n - group));
        for (int r = 0; r < count; ++r) {
          x_rows[static_cast<size_t>(r)] = x_row(group + r);
          y_rows[static_cast<size_t>(r)] = y.row(group + r);
        }
        kernel(first, last, x_rows.data(), y_rows.data(), count);
      }
    }
  };
  if (out_rows * in_cols < kParallelElements) {
    slice(0, out_rows);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    slice(out_rows * thread / threads, out_rows * (thread + 1) / threads);
  }
}

// The common case: the float rows of x.
template <typename Kernel>
void run_row_groups(const MatrixF32& x, const MatrixF32& y, int64_t out_rows, int64_t in_cols, int64_t weight_row_bytes,
                    const Kernel& kernel) {
  run_row_groups_of(
      x.rows, [&](int64_t i) -> const float* { return x.row(i); }, y, out_rows, in_cols, weight_row_bytes, kernel);
}

}  // namespace nvfp4lm::cpu
