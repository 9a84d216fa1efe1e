// CPU RMSNorm. Rows are independent in the forward and in dx; dweight sums over rows, which is done in a
// fixed number of row chunks (each with its own partial sums, added up in chunk order) so the result is
// race-free and the same for any thread count.
//
// Backward, per row with r = rstd, g = dy * weight:
//   dx_j = r * g_j - x_j * r^3 * (sum_k g_k x_k) / dim,     dweight_j += dy_j * x_j * r
#include "ops/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/views.h"

namespace nvfp4lm::cpu {
namespace {

constexpr int64_t kMaxWeightChunks = 64;
constexpr int64_t kRmsnormParallelElements = 16384;

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd) {
  const RowsF32 xs(x, 1, "rmsnorm_forward x");
  const RowsF32 ys(y, 1, "rmsnorm_forward y");
  const float* w = RowsF32(weight, 1, "rmsnorm_forward weight").data();
  float* rstd_out = nullptr;
  if (rstd != nullptr) {
    NVFP4LM_ASSERT(rstd->is_contiguous(), "rmsnorm_forward: rstd {} must be contiguous", rstd->str());
    rstd_out = RowsF32(*rstd, 1, "rmsnorm_forward rstd").data();
  }
  const int64_t rows = xs.count(), dim = xs.width();
#pragma omp parallel for schedule(static) if (rows * dim > kRmsnormParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xs.row(r);
    float* yr = ys.row(r);
    float sum_squares = 0.f;
#pragma omp simd reduction(+ : sum_squares)
    for (int64_t j = 0; j < dim; ++j) sum_squares += xr[j] * xr[j];
    const float inv = 1.f / std::sqrt(sum_squares / static_cast<float>(dim) + eps);
    if (rstd_out != nullptr) rstd_out[r] = inv;
#pragma omp simd
    for (int64_t j = 0; j < dim; ++j) yr[j] = (xr[j] * inv) * w[j];
  }
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight) {
  const RowsF32 dys(dy, 1, "rmsnorm_backward dy");
  const RowsF32 xs(x, 1, "rmsnorm_backward x");
  const RowsF32 dxs(dx, 1, "rmsnorm_backward dx");
  const float* w = RowsF32(weight, 1, "rmsnorm_backward weight").data();
  float* dw = RowsF32(dweight, 1, "rmsnorm_backward dweight").data();
  NVFP4LM_ASSERT(rstd.is_contiguous(), "rmsnorm_backward: rstd {} must be contiguous", rstd.str());
  const float* rs = RowsF32(rstd, 1, "rmsnorm_backward rstd").data();
  const int64_t rows = xs.count(), dim = xs.width();
  if (rows == 0) return;

  const int64_t chunks = std::min(rows, kMaxWeightChunks);
  std::vector<float> partial(static_cast<size_t>(chunks * dim), 0.f);
  const float inv_dim = 1.f / static_cast<float>(dim);
#pragma omp parallel for schedule(dynamic, 1) if (rows * dim > kRmsnormParallelElements)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    float* dw_part = partial.data() + chunk * dim;
    const int64_t begin = rows * chunk / chunks, end = rows * (chunk + 1) / chunks;
    for (int64_t r = begin; r < end; ++r) {
      const float* dyr = dys.row(r);
      const float* xr = xs.row(r);
      float* dxr = dxs.row(r);
      const float inv = rs[r];
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j < dim; ++j) {
        dot += dyr[j] * w[j] * xr[j];
        dw_part[j] += dyr[j] * xr[j] * inv;
      }
      const float coeff = inv * inv * inv * dot * inv_dim;
      // dx may alias dy: element j reads dy_j before writing dx_j.
#pragma omp simd
      for (int64_t j = 0; j < dim; ++j) dxr[j] = inv * dyr[j] * w[j] - coeff * xr[j];
    }
  }
#pragma omp parallel for schedule(static) if (chunks * dim > kRmsnormParallelElements)
  for (int64_t j = 0; j < dim; ++j) {
    float sum = 0.f;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) sum += partial[static_cast<size_t>(chunk * dim + j)];
    dw[j] += sum;
  }
}

}  // namespace nvfp4lm::cpu
