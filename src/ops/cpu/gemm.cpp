// CPU GEMM: a thin, copy-free wrapper over OpenBLAS sgemm. Row-strided views map directly onto BLAS leading
// dimensions, so narrow()ed fused-projection outputs cost nothing extra; OpenBLAS does its own threading.
#include "ops/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <limits>

#include "ops/cpu/views.h"

namespace nvfp4lm::cpu {
namespace {

blasint to_blas(int64_t value, const char* what) {
  NVFP4LM_ASSERT(value <= std::numeric_limits<blasint>::max(), "gemm: {} = {} exceeds the BLAS integer range", what,
                 value);
  return static_cast<blasint>(value);
}

}  // namespace

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c, float alpha, float beta) {
  const MatrixF32 ma = as_matrix(a, "gemm A");
  const MatrixF32 mb = as_matrix(b, "gemm B");
  const MatrixF32 mc = as_matrix(c, "gemm C");
  const int64_t m = mc.rows, n = mc.cols;
  const int64_t k = transpose_a ? ma.rows : ma.cols;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // BLAS implementations disagree on K == 0; the math says C = beta * C.
    for (int64_t i = 0; i < m; ++i) {
      float* row = mc.row(i);
      for (int64_t j = 0; j < n; ++j) row[j] = beta == 0.f ? 0.f : beta * row[j];
    }
    return;
  }
  if (m == 1) {
    // One row (a decode step): sgemv. OpenBLAS's sgemm would first pack all of B (e.g. a 150k x 2560 lm_head)
    // for a single row, which costs ~10x the product itself. Zeroing first keeps "beta == 0 ignores C".
    if (beta == 0.f) std::fill(mc.data, mc.data + n, 0.f);
    const blasint inc_a = transpose_a ? to_blas(ma.ld, "lda") : 1;
    if (transpose_b) {  // c = B [n, k] · a
      cblas_sgemv(CblasRowMajor, CblasNoTrans, to_blas(n, "N"), to_blas(k, "K"), alpha, mb.data, to_blas(mb.ld, "ldb"),
                  ma.data, inc_a, beta, mc.data, 1);
    } else {  // c = B [k, n]ᵀ · a
      cblas_sgemv(CblasRowMajor, CblasTrans, to_blas(k, "K"), to_blas(n, "N"), alpha, mb.data, to_blas(mb.ld, "ldb"),
                  ma.data, inc_a, beta, mc.data, 1);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
              to_blas(m, "M"), to_blas(n, "N"), to_blas(k, "K"), alpha, ma.data, to_blas(ma.ld, "lda"), mb.data,
              to_blas(mb.ld, "ldb"), beta, mc.data, to_blas(mc.ld, "ldc"));
}

}  // namespace nvfp4lm::cpu
