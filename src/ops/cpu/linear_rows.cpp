// See linear_rows.h.
#include "ops/cpu/linear_rows.h"

#include "ops/cpu/dense_dot.h"
#include "ops/cpu/row_groups.h"
#include "ops/cpu/views.h"

namespace nvfp4lm::cpu {

void linear_forward_independent_rows(const Tensor& x, const Tensor& w, Tensor& y) {
  const MatrixF32 mx = as_matrix(x, "linear x");
  const MatrixF32 mw = as_matrix(w, "linear w");
  const MatrixF32 my = as_matrix(y, "linear y");
  const DenseRows rows{mw.data, mw.ld, mw.cols};
  const DenseDotFamily::Variant& variant = dense_dot_family().chosen();
  run_row_groups(mx, my, mw.rows, mw.cols, mw.cols * static_cast<int64_t>(sizeof(float)),
                 [&](int64_t first, int64_t last, const float* const* x_rows, float* const* y_rows, int n) {
                   dense_dot_rows(variant, rows, first, last, x_rows, y_rows, n);
                 });
}

}  // namespace nvfp4lm::cpu
