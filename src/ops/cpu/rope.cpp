// CPU RoPE: one pass over the tokens (parallel), each token's heads share its cos/sin row.
#include "ops/cpu/rope.h"

#include "ops/cpu/views.h"

namespace nvfp4lm::cpu {

void rope_rotate(Tensor& x, const Tensor* positions, const Tensor& cos, const Tensor& sin, bool inverse) {
  const RowsF32 tokens(x, 2, "rope x");
  const int64_t heads = x.dim(-2), head_dim = x.dim(-1), half = head_dim / 2;
  const MatrixF32 cos_table = as_matrix(cos, "rope cos");
  const MatrixF32 sin_table = as_matrix(sin, "rope sin");
  const int32_t* pos = positions != nullptr ? int32_data(*positions, "rope positions") : nullptr;
  const int64_t count = tokens.count();
  // Positions can come from a prompt longer than the table: checked (not asserted) before any work.
  for (int64_t n = 0; pos != nullptr && n < count; ++n) {
    NVFP4LM_CHECK(pos[n] >= 0 && pos[n] < cos_table.rows,
                  "rope: position {} of token {} is outside the RoPE table [0, {}) (the sequence is longer than the "
                  "context the model was set up for)",
                  pos[n], n, cos_table.rows);
  }
  // The backward rotates by -angle: same cos, negated sin.
  const float sin_sign = inverse ? -1.f : 1.f;
#pragma omp parallel for schedule(static) if (count * heads * head_dim > 16384)
  for (int64_t n = 0; n < count; ++n) {
    const int64_t row = pos != nullptr ? pos[n] : n;
    const float* c = cos_table.row(row);
    const float* s = sin_table.row(row);
    float* token = tokens.row(n);
    for (int64_t h = 0; h < heads; ++h) {
      float* x1 = token + h * head_dim;
      float* x2 = x1 + half;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const float a = x1[i], b = x2[i], sn = sin_sign * s[i];
        x1[i] = a * c[i] - b * sn;
        x2[i] = b * c[i] + a * sn;
      }
    }
  }
}

}  // namespace nvfp4lm::cpu
