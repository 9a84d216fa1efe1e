// See batch.h for the row layout and tensor conventions.
#include "data/batch.h"

#include "core/error.h"
#include "ops/cross_entropy.h"

namespace nvfp4lm {
namespace {

int64_t checked_length(const Sample& sample, int64_t seq_len) {
  const auto length = static_cast<int64_t>(sample.ids.size());
  NVFP4LM_CHECK(length >= 1 && length <= seq_len,
                "sample from line {} has {} tokens; rows hold 1..seq_len = {} (read the dataset with max_tokens = "
                "seq_len)",
                sample.source_line, length, seq_len);
  return length;
}

size_t fill_rows(std::span<const Sample> samples, std::span<const int64_t> order, size_t begin, int64_t seq_len,
                 int64_t max_rows, bool packing, std::vector<std::vector<int64_t>>& rows) {
  size_t next = begin;
  for (int64_t row = 0; row < max_rows && next < order.size(); ++row) {
    std::vector<int64_t> indices;
    int64_t used = 0;
    while (next < order.size()) {
      const int64_t length = checked_length(samples[static_cast<size_t>(order[next])], seq_len);
      if (!indices.empty() && (!packing || used + length > seq_len)) break;
      indices.push_back(order[next]);
      used += length;
      ++next;
    }
    rows.push_back(std::move(indices));
  }
  return next;
}

}  // namespace

size_t pack_rows(std::span<const Sample> samples, std::span<const int64_t> order, size_t begin, int64_t seq_len,
                 int64_t max_rows, std::vector<std::vector<int64_t>>& rows) {
  return fill_rows(samples, order, begin, seq_len, max_rows, /*packing=*/true, rows);
}

size_t single_rows(std::span<const Sample> samples, std::span<const int64_t> order, size_t begin, int64_t seq_len,
                   int64_t max_rows, std::vector<std::vector<int64_t>>& rows) {
  return fill_rows(samples, order, begin, seq_len, max_rows, /*packing=*/false, rows);
}

TokenBatch assemble_batch(std::span<const Sample> samples, const std::vector<std::vector<int64_t>>& rows,
                          int64_t row_tokens, int32_t pad_id) {
  const auto batch_rows = static_cast<int64_t>(rows.size());
  NVFP4LM_ASSERT(batch_rows > 0 && row_tokens > 0, "empty batch");
  TokenBatch batch;
  const Shape shape{batch_rows, row_tokens};
  batch.ids = Tensor::empty(shape, DType::I32);
  batch.targets = Tensor::empty(shape, DType::I32);
  batch.positions = Tensor::empty(shape, DType::I32);
  batch.segment_ids = Tensor::empty(shape, DType::I32);
  int32_t* ids = batch.ids.data<int32_t>();
  int32_t* targets = batch.targets.data<int32_t>();
  int32_t* positions = batch.positions.data<int32_t>();
  int32_t* segments = batch.segment_ids.data<int32_t>();

  int32_t segment = 0;
  for (int64_t r = 0; r < batch_rows; ++r) {
    const size_t row_begin = static_cast<size_t>(r * row_tokens);
    size_t at = row_begin;
    for (int64_t index : rows[static_cast<size_t>(r)]) {
      const Sample& sample = samples[static_cast<size_t>(index)];
      const size_t length = sample.ids.size();
      NVFP4LM_ASSERT(at + length <= row_begin + static_cast<size_t>(row_tokens), "row {} overflows {} tokens", r,
                     row_tokens);
      write_next_token_targets(sample, std::span<int32_t>(targets + at, length));
      for (size_t t = 0; t < length; ++t) {
        ids[at + t] = sample.ids[t];
        positions[at + t] = static_cast<int32_t>(t);
        segments[at + t] = segment;
        if (targets[at + t] != kIgnoreIndex) ++batch.tokens_in_batch;
      }
      batch.sample_indices.push_back(index);
      at += length;
      ++segment;
    }
    const size_t row_end = row_begin + static_cast<size_t>(row_tokens);
    if (at < row_end) {
      batch.padding_tokens += static_cast<int64_t>(row_end - at);
      for (size_t t = 0; at + t < row_end; ++t) {
        ids[at + t] = pad_id;
        targets[at + t] = kIgnoreIndex;
        positions[at + t] = static_cast<int32_t>(t);
        segments[at + t] = segment;
      }
      ++segment;
    }
  }
  return batch;
}

}  // namespace nvfp4lm
