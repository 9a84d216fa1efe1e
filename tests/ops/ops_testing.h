// Helpers shared by the op tests: double-precision copies of tensors, central finite differences of a scalar
// function computed in double, and the tolerances the op tests use (stated once, here).
//
// How the op tests work: each op is compared with a direct formula evaluated in double on the same (fp32)
// inputs; each backward is compared with central finite differences of a double-precision scalar function
// L = sum(out * R) (R random) built on that same formula. With h = 1e-3 the FD truncation error is
// O(h^2 * f''') ~ 1e-7, far below the fp32 rounding of the op under test.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/numeric.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/cpu/cpu_features.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::test {

// fp32 op vs a double formula: a few fp32 roundings per output plus sums of up to ~100 terms.
inline constexpr Tolerance kForwardTol{2e-5f, 2e-4f};
// fp32 backward vs double finite differences: longer chains (softmax, norms) of fp32 roundings.
inline constexpr Tolerance kGradTol{5e-5f, 5e-4f};
inline constexpr double kFiniteDifferenceStep = 1e-3;

inline std::vector<double> to_doubles(const Tensor& t) {
  std::vector<float> f = to_float_vector(t);
  return {f.begin(), f.end()};
}

inline void expect_near_doubles(const Tensor& actual, const std::vector<double>& expected, Tolerance tol,
                                const std::string& what) {
  std::vector<float> e(expected.begin(), expected.end());
  expect_close(to_float_vector(actual), e, tol, what);
}

// d loss / d values[i] for every i by central differences; `loss` reads `values` (captured by reference).
inline std::vector<double> finite_difference(std::vector<double>& values, const std::function<double()>& loss,
                                             double step = kFiniteDifferenceStep) {
  std::vector<double> grad(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const double saved = values[i];
    values[i] = saved + step;
    const double plus = loss();
    values[i] = saved - step;
    const double minus = loss();
    values[i] = saved;
    grad[i] = (plus - minus) / (2 * step);
  }
  return grad;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// A view of `t` that is NOT contiguous: t's rows placed inside a wider buffer (extra columns filled with a
// sentinel), returned as narrow(-1, offset, width). Used to check that ops honour row strides.
inline Tensor strided_copy(const Tensor& t, int64_t extra_columns, int64_t offset, float sentinel = 1e30f) {
  std::vector<int64_t> dims = t.shape().to_vector();
  dims.back() += extra_columns;
  Tensor wide = Tensor::empty(Shape(dims), DType::F32);
  float* p = wide.data<float>();
  for (int64_t i = 0; i < wide.numel(); ++i) p[i] = sentinel;
  Tensor view = wide.narrow(-1, offset, t.dim(-1));
  view.copy_from(t);
  return view;
}

// An NVFP4 matrix [rows, cols] on the CPU (Rows layout) with its code and scale bytes left for the test to write.
inline Nvfp4Tensor empty_nvfp4(int64_t rows, int64_t cols, float tensor_scale) {
  Nvfp4Tensor q;
  q.rows = rows;
  q.cols = cols;
  q.tensor_scale = tensor_scale;
  q.codes = Tensor::empty({rows, cols / 2}, DType::E2M1x2);
  q.block_scales = Tensor::empty({rows, cols / 16}, DType::E4M3);
  return q;
}

// An NVFP4 weight [out, in] whose code and scale bytes are all drawn from rng (not a quantized tensor), so every code
// and E4M3 scales from tiny subnormals to 448 appear, negative ones too. NaN scale bytes (0x7F/0xFF) become 1.0: a
// model with them does not load.
inline Nvfp4Tensor random_nvfp4_bytes(int64_t out, int64_t in, Rng& rng, float tensor_scale) {
  Nvfp4Tensor w = empty_nvfp4(out, in, tensor_scale);
  auto* codes = static_cast<uint8_t*>(w.codes.raw());
  for (int64_t i = 0; i < w.codes.numel(); ++i) codes[i] = static_cast<uint8_t>(rng.next_u64() & 0xFF);
  auto* scales = static_cast<uint8_t*>(w.block_scales.raw());
  for (int64_t i = 0; i < w.block_scales.numel(); ++i) {
    uint8_t s = static_cast<uint8_t>(rng.next_u64() & 0xFF);
    if ((s & 0x7F) == 0x7F) s = 0x38;  // 1.0
    scales[i] = s;
  }
  return w;
}

// The AArch64 variants of the integer dot kernels (ops/cpu/arm/kernels.h) do the portable variant's fp32 operations
// in its order: their outputs are its outputs bit for bit (compared as bits: -0 and NaN payloads too).
inline bool sums_in_the_portable_order(const cpu::CpuIsa& isa) { return isa.needs.has(cpu::CpuFeature::Asimd); }
inline void expect_same_bits(const std::vector<float>& actual, const std::vector<float>& portable, const char* variant,
                             const std::string& where) {
  ASSERT_EQ(actual.size(), portable.size());
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_EQ(float_bits(actual[i]), float_bits(portable[i]))
        << variant << " " << where << " output " << i << ": " << actual[i] << " vs the portable " << portable[i];
}

// A dot-rows kernel (nvfp4_dot_rows and its int8 twins) over weight rows [first, last): run(first, last) returns the
// outputs [n, rows], pre-filled with -7 before the call. The rows asked for must equal the full run's, the others
// must stay -7, and the full run must repeat bit for bit.
inline void expect_writes_only_requested_rows(const std::function<std::vector<float>(int64_t, int64_t)>& run,
                                              int64_t rows, int64_t n, int64_t first, int64_t last,
                                              const std::string& what) {
  const std::vector<float> full = run(0, rows);
  const std::vector<float> part = run(first, last);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < rows; ++o) {
      const size_t i = static_cast<size_t>(r * rows + o);
      if (o >= first && o < last)
        EXPECT_EQ(part[i], full[i]) << what;
      else
        EXPECT_EQ(part[i], -7.0f) << what;
    }
  EXPECT_EQ(run(0, rows), full) << what;
}

}  // namespace nvfp4lm::test
