// Where cuBLASLt reads the E4M3 block scales of an NVFP4 operand (CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3): the
// "1D block scaling factors layout" of the cuBLAS documentation (§3.1.4.4.2), for a K-major operand of `rows` rows
// (M for A, N for B) and k_blocks = K/16 scales a row. Rows are padded to a multiple of 128 and scale columns to a
// multiple of 4 (the padding holds zeros); the scales form tiles of 128 rows x 4 columns, 512 bytes each, tiles in
// row-major order (the row tile outer), and inside a tile
//   offset(r, c) = (r % 32) * 16 + ((r % 128) / 32) * 4 + (c % 4).
// (Read as data: NVIDIA's nvmath-python helpers/matmul.py get_block_scale_offset and PyTorch's to_blocked state the
// same layout; tests/ops/cuda/test_nvfp4_w4a4_cublaslt.cpp checks this formula and the swizzle kernel against the
// second as a reshape / permute.) The layout is the same for A and B whatever the transposes.
// Host and device; nothing here touches memory.
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace nvfp4lm::cuda {

inline constexpr int64_t kScaleTileRows = 128;
inline constexpr int64_t kScaleTileColumns = 4;
inline constexpr int64_t kScaleTileBytes = kScaleTileRows * kScaleTileColumns;

NVFP4LM_HD int64_t padded_scale_rows(int64_t rows) {
  return (rows + kScaleTileRows - 1) / kScaleTileRows * kScaleTileRows;
}
NVFP4LM_HD int64_t padded_scale_columns(int64_t k_blocks) {
  return (k_blocks + kScaleTileColumns - 1) / kScaleTileColumns * kScaleTileColumns;
}
// Bytes of the laid-out scales of a [rows, 16 * k_blocks] operand.
NVFP4LM_HD int64_t block_scale_layout_bytes(int64_t rows, int64_t k_blocks) {
  return padded_scale_rows(rows) * padded_scale_columns(k_blocks);
}
// Byte offset of the scale of row r, block column c.
NVFP4LM_HD int64_t block_scale_offset(int64_t r, int64_t c, int64_t k_blocks) {
  const int64_t tile =
      (r / kScaleTileRows) * (padded_scale_columns(k_blocks) / kScaleTileColumns) + c / kScaleTileColumns;
  return tile * kScaleTileBytes + (r % 32) * 16 + ((r % kScaleTileRows) / 32) * 4 + c % kScaleTileColumns;
}

}  // namespace nvfp4lm::cuda
