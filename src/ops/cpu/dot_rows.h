// What the dot-rows kernel families share (nvfp4_dot.h, dense_dot.h, bf16_dot.h, nvfp4_int8_dot.h,
// int8_weight_dot.h, nvfp4_interleaved.h): a variant is one kernel per activation row count n in [1, kDotMaxRows],
// n a template parameter so the n accumulators live in registers.
#pragma once

#include <array>
#include <utility>

namespace nvfp4lm::cpu {

// Activation rows one call of a dot-rows kernel takes (their accumulators live in registers).
inline constexpr int kDotMaxRows = 8;

// [n - 1]: the kernel for n activation rows.
template <typename Fn>
using RowKernels = std::array<Fn, kDotMaxRows>;

// The table of a kernel template over n: row_kernels<Fn>([]<int N>() { return &rows_avx2<N>; }).
template <typename Fn, typename Make>
RowKernels<Fn> row_kernels(Make make) {
  return [&]<int... Ns>(std::integer_sequence<int, Ns...>) {
    return RowKernels<Fn>{make.template operator()<Ns + 1>()...};
  }
  (std::make_integer_sequence<int, kDotMaxRows>{});
}

}  // namespace nvfp4lm::cpu
