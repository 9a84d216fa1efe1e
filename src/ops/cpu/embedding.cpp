// CPU embedding: a row gather forward; the backward scatter-adds rows. To stay race-free and deterministic
// without atomics, the backward splits the hidden dimension (not the tokens) across threads: each thread
// owns a column slice of dtable and walks all tokens in order.
#include "ops/cpu/embedding.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/numeric.h"
#include "ops/cpu/views.h"

namespace nvfp4lm::cpu {
namespace {

// User data reaches here (token ids), so this is a CHECK with a message, not an assertion.
void check_ids(const int32_t* ids, int64_t count, int64_t vocab, const char* op) {
  for (int64_t i = 0; i < count; ++i) {
    NVFP4LM_CHECK(ids[i] >= 0 && ids[i] < vocab,
                  "{}: token id {} at position {} is outside the vocabulary [0, {}) (the data or tokenizer does not "
                  "match the model)",
                  op, ids[i], i, vocab);
  }
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out) {
  const int32_t* id = int32_data(ids, "embedding_forward ids");
  if (table.dtype() == DType::BF16) {  // the inference model's table kept in BF16: rows widened exactly
    NVFP4LM_ASSERT(table.rank() == 2 && table.is_contiguous(), "embedding_forward: BF16 table {} must be contiguous",
                   table.str());
    const RowsF32 rows(out, 1, "embedding_forward out");
    check_ids(id, rows.count(), table.dim(0), "embedding_forward");
    const int64_t count = rows.count(), width = table.dim(1);
    const auto* bits = static_cast<const uint16_t*>(table.raw());
#pragma omp parallel for schedule(static) if (count * width > 32768)
    for (int64_t i = 0; i < count; ++i) {
      const uint16_t* source = bits + static_cast<int64_t>(id[i]) * width;
      float* target = rows.row(i);
      for (int64_t c = 0; c < width; ++c) target[c] = bf16_to_float(source[c]);
    }
    return;
  }
  const MatrixF32 tab = as_matrix(table, "embedding_forward table");
  const RowsF32 rows(out, 1, "embedding_forward out");
  check_ids(id, rows.count(), tab.rows, "embedding_forward");
  const int64_t count = rows.count();
  const size_t row_bytes = static_cast<size_t>(tab.cols) * sizeof(float);
#pragma omp parallel for schedule(static) if (count * tab.cols > 32768)
  for (int64_t i = 0; i < count; ++i) std::memcpy(rows.row(i), tab.row(id[i]), row_bytes);
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  const int32_t* id = int32_data(ids, "embedding_backward ids");
  const MatrixF32 tab = as_matrix(dtable, "embedding_backward dtable");
  const RowsF32 rows(dout, 1, "embedding_backward dout");
  check_ids(id, rows.count(), tab.rows, "embedding_backward");
  const int64_t count = rows.count(), width = tab.cols;
  // Column slices of at least 64 floats (a cache line multiple) per thread.
  const int64_t slices = std::clamp<int64_t>(width / 64, 1, omp_get_max_threads());
#pragma omp parallel for schedule(static) if (count * width > 32768)
  for (int64_t slice = 0; slice < slices; ++slice) {
    const int64_t begin = width * slice / slices, end = width * (slice + 1) / slices;
    for (int64_t i = 0; i < count; ++i) {
      const float* src = rows.row(i);
      float* dst = tab.row(id[i]);
#pragma omp simd
      for (int64_t j = begin; j < end; ++j) dst[j] += src[j];
    }
  }
}

}  // namespace nvfp4lm::cpu
