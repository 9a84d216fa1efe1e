// CPU elementwise ops, parallel over rows of [..., dim] views.
#include "ops/cpu/elementwise.h"

#include <algorithm>
#include <vector>

#include "core/rng.h"
#include "ops/cpu/views.h"

namespace nvfp4lm::cpu {
namespace {

constexpr int64_t kElementwiseParallelElements = 32768;
constexpr int64_t kSumChunks = 64;
constexpr int64_t kSegment = 1024;  // fp32 partial sums span at most this many elements

}  // namespace

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  const RowsF32 as(a, 1, "add a"), bs(b, 1, "add b"), os(out, 1, "add out");
  const int64_t rows = as.count(), width = as.width();
#pragma omp parallel for schedule(static) if (rows * width > kElementwiseParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = as.row(r);
    const float* y = bs.row(r);
    float* o = os.row(r);
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) o[j] = x[j] + y[j];
  }
}

void mul_inplace(Tensor& a, const Tensor& b) {
  const RowsF32 as(a, 1, "mul_inplace a"), bs(b, 1, "mul_inplace b");
  const int64_t rows = as.count(), width = as.width();
#pragma omp parallel for schedule(static) if (rows * width > kElementwiseParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    float* x = as.row(r);
    const float* y = bs.row(r);
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) x[j] *= y[j];
  }
}

void scale_inplace(Tensor& a, float s) {
  const RowsF32 as(a, 1, "scale_inplace a");
  const int64_t rows = as.count(), width = as.width();
#pragma omp parallel for schedule(static) if (rows * width > kElementwiseParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    float* x = as.row(r);
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) x[j] *= s;
  }
}

void fill(Tensor& a, float value) {
  const RowsF32 as(a, 1, "fill a");
  const int64_t rows = as.count(), width = as.width();
#pragma omp parallel for schedule(static) if (rows * width > kElementwiseParallelElements)
  for (int64_t r = 0; r < rows; ++r) std::fill_n(as.row(r), width, value);
}

void cast(const Tensor& src, Tensor& dst) {
  NVFP4LM_ASSERT(src.device().is_cpu() && dst.device().is_cpu(), "cast {} -> {} on the CPU", src.str(), dst.str());
  if (dst.is_contiguous()) {
    convert_cpu(src, dst);
    return;
  }
  // convert_cpu writes contiguous tensors only: convert into a staging copy, then scatter.
  Tensor staged = Tensor::empty(dst.shape(), dst.dtype());
  convert_cpu(src, staged);
  dst.copy_from(staged);
}

void dropout(const Tensor& src, Tensor& dst, float p, uint64_t seed, bool accumulate) {
  const RowsF32 in(src, 1, "dropout src"), out(dst, 1, "dropout dst");
  const int64_t rows = in.count(), width = in.width();
  const float keep_scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (rows * width > kElementwiseParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in.row(r);
    float* y = out.row(r);
    for (int64_t j = 0; j < width; ++j) {
      const auto index = static_cast<uint64_t>(r * width + j);
      const float kept = counter_uniform(seed, index) >= p ? x[j] * keep_scale : 0.0f;
      y[j] = accumulate ? y[j] + kept : kept;
    }
  }
}

double sum_squares(const Tensor& a) {
  const RowsF32 as(a, 1, "sum_squares a");
  const int64_t rows = as.count(), width = as.width();
  if (rows == 0 || width == 0) return 0.0;
  // Fixed chunks of rows (or of a single long row), partial sums added in chunk order.
  const int64_t total = rows * width;
  const int64_t chunks = std::min<int64_t>(kSumChunks, std::max<int64_t>(1, total / 4096));
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t begin = total * chunk / chunks, end = total * (chunk + 1) / chunks;
    double sum = 0.0;
    for (int64_t i = begin; i < end;) {
      // Walk [begin, end) in segments that stay inside one row.
      const int64_t r = i / width, j0 = i % width, j1 = std::min({width, j0 + (end - i), j0 + kSegment});
      const float* x = as.row(r);
      float row_sum = 0.f;  // fp32 within a short segment (vectorised), double across segments
#pragma omp simd reduction(+ : row_sum)
      for (int64_t j = j0; j < j1; ++j) row_sum += x[j] * x[j];
      sum += row_sum;
      i += j1 - j0;
    }
    partial[static_cast<size_t>(chunk)] = sum;
  }
  double sum = 0.0;
  for (double p : partial) sum += p;
  return sum;
}

}  // namespace nvfp4lm::cpu
