// Register-blocked micro-kernels for the CPU attention: the small matrix products of one tile, with operands
// given as lists of row pointers (rows of q / k / v / dout live at arbitrary strides inside views, and GQA
// interleaves heads). Written with GCC vector types (16 floats) that each x86-64 level variant lowers to
// its own width (1 zmm, 2 ymm or 4 xmm); the kernels are always inlined into those variants.
//  - dot_block:      out[r][j] = scale * a_r · b_j for up to 16 rows b at once (b transposed to [dim][16], so
//                    the 16 results of a row form one vector and no horizontal sums are needed);
//  - accumulate_rows: c_i += sum_k w(i, k) x_k over head_dim vectors, 4 rows x 32 floats of c in registers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace nvfp4lm::cpu::tile {

using Vec16 = float __attribute__((vector_size(64)));
inline constexpr int64_t kKeys = 16;  // keys per dot_block

#define NVFP4LM_TILE_INLINE [[gnu::always_inline]] inline

// bt[d * 16 + j] = b[j][d] for j < count; zero for j in [count, 16).
NVFP4LM_TILE_INLINE void transpose_block(const float* const* b, int64_t count, int64_t dim, float* bt) {
  for (int64_t j = 0; j < kKeys; ++j) {
    if (j < count) {
      const float* row = b[j];
      for (int64_t d = 0; d < dim; ++d) bt[d * kKeys + j] = row[d];
    } else {
      for (int64_t d = 0; d < dim; ++d) bt[d * kKeys + j] = 0.f;
    }
  }
}

// out[r * out_stride + j] = scale * sum_d a[r][d] * bt[d * 16 + j] for r < rows, j < 16 (all 16 written).
NVFP4LM_TILE_INLINE void dot_block(const float* const* a, int64_t rows, const float* bt, int64_t dim, float scale,
                                   float* out, int64_t out_stride) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float *a0 = a[r], *a1 = a[r + 1], *a2 = a[r + 2], *a3 = a[r + 3];
    Vec16 s0 = {}, s1 = {}, s2 = {}, s3 = {};
    for (int64_t d = 0; d < dim; ++d) {
      Vec16 b;
      std::memcpy(&b, bt + d * kKeys, sizeof b);
      s0 += a0[d] * b;
      s1 += a1[d] * b;
      s2 += a2[d] * b;
      s3 += a3[d] * b;
    }
    s0 *= scale;
    s1 *= scale;
    s2 *= scale;
    s3 *= scale;
    std::memcpy(out + r * out_stride, &s0, sizeof s0);
    std::memcpy(out + (r + 1) * out_stride, &s1, sizeof s1);
    std::memcpy(out + (r + 2) * out_stride, &s2, sizeof s2);
    std::memcpy(out + (r + 3) * out_stride, &s3, sizeof s3);
  }
  for (; r < rows; ++r) {
    const float* a0 = a[r];
    Vec16 s0 = {};
    for (int64_t d = 0; d < dim; ++d) {
      Vec16 b;
      std::memcpy(&b, bt + d * kKeys, sizeof b);
      s0 += a0[d] * b;
    }
    s0 *= scale;
    std::memcpy(out + r * out_stride, &s0, sizeof s0);
  }
}

// c[i][0:dim] += sum_{k < nk} w[i * wi + k * wk] * x[k][0:dim] for i < ni. Passing (wi, wk) = (stride, 1)
// multiplies by w, (1, stride) by wᵀ. (One cache-sized chunk of k; accumulate_rows below does any nk.)
NVFP4LM_TILE_INLINE void accumulate_rows_chunk(float* const* c, int64_t ni, const float* w, int64_t wi, int64_t wk,
                                               const float* const* x, int64_t nk, int64_t dim) {
  constexpr int64_t kCols = 32;
  int64_t i = 0;
  for (; i + 4 <= ni; i += 4) {
    const float* w0 = w + i * wi;
    int64_t d = 0;
    for (; d + kCols <= dim; d += kCols) {
      Vec16 c00, c01, c10, c11, c20, c21, c30, c31;
      std::memcpy(&c00, c[i] + d, 64);
      std::memcpy(&c01, c[i] + d + 16, 64);
      std::memcpy(&c10, c[i + 1] + d, 64);
      std::memcpy(&c11, c[i + 1] + d + 16, 64);
      std::memcpy(&c20, c[i + 2] + d, 64);
      std::memcpy(&c21, c[i + 2] + d + 16, 64);
      std::memcpy(&c30, c[i + 3] + d, 64);
      std::memcpy(&c31, c[i + 3] + d + 16, 64);
      for (int64_t k = 0; k < nk; ++k) {
        Vec16 x0, x1;
        std::memcpy(&x0, x[k] + d, 64);
        std::memcpy(&x1, x[k] + d + 16, 64);
        const float* wk0 = w0 + k * wk;
        const float v0 = wk0[0], v1 = wk0[wi], v2 = wk0[2 * wi], v3 = wk0[3 * wi];
        c00 += v0 * x0;
        c01 += v0 * x1;
        c10 += v1 * x0;
        c11 += v1 * x1;
        c20 += v2 * x0;
        c21 += v2 * x1;
        c30 += v3 * x0;
        c31 += v3 * x1;
      }
      std::memcpy(c[i] + d, &c00, 64);
      std::memcpy(c[i] + d + 16, &c01, 64);
      std::memcpy(c[i + 1] + d, &c10, 64);
      std::memcpy(c[i + 1] + d + 16, &c11, 64);
      std::memcpy(c[i + 2] + d, &c20, 64);
      std::memcpy(c[i + 2] + d + 16, &c21, 64);
      std::memcpy(c[i + 3] + d, &c30, 64);
      std::memcpy(c[i + 3] + d + 16, &c31, 64);
    }
    // Columns past the last multiple of 32 (odd head_dim): plain loops.
    for (int64_t ii = i; ii < i + 4 && d < dim; ++ii) {
      for (int64_t k = 0; k < nk; ++k) {
        const float weight = w[ii * wi + k * wk];
        for (int64_t dd = d; dd < dim; ++dd) c[ii][dd] += weight * x[k][dd];
      }
    }
  }
  for (; i < ni; ++i) {
    for (int64_t k = 0; k < nk; ++k) {
      const float weight = w[i * wi + k * wk];
      const float* xk = x[k];
      float* ci = c[i];
#pragma omp simd
      for (int64_t dd = 0; dd < dim; ++dd) ci[dd] += weight * xk[dd];
    }
  }
}

// The same, with the k loop cut into chunks so the chunk's x rows stay in cache while every row block of c
// passes over them (x is re-read once per 4 rows x 32 columns of c).
NVFP4LM_TILE_INLINE void accumulate_rows(float* const* c, int64_t ni, const float* w, int64_t wi, int64_t wk,
                                         const float* const* x, int64_t nk, int64_t dim) {
  constexpr int64_t kChunk = 128;
  for (int64_t k0 = 0; k0 < nk; k0 += kChunk) {
    accumulate_rows_chunk(c, ni, w + k0 * wk, wi, wk, x + k0, std::min(kChunk, nk - k0), dim);
  }
}

#undef NVFP4LM_TILE_INLINE

}  // namespace nvfp4lm::cpu::tile
