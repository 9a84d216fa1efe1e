// Turning samples into the model's input tensors: row layout (packing or one sample a row) and batch assembly.
//
// A batch is B rows of T tokens, four I32 CPU tensors [B, T] (the fields of TrainBatch in
// model/qwen3_trainable.h, which a TokenBatch converts to member by member):
//   ids          token ids; pad_id in padding
//   targets      next-token targets inside each sample (sample.h): ids[b, t+1] when that token is trained and
//                belongs to the same sample, else kIgnoreIndex (-100); always -100 on a sample's last token
//                and on padding, so no target crosses a sample boundary
//   positions    position of the token within its sample (RoPE): 0, 1, ... restarting at every sample; the
//                padding tail counts 0, 1, ... as well
//   segment_ids  which sample a token belongs to, numbered 0, 1, 2, ... across the whole batch in row order
//                (distinct in the batch, not just the row); a row's padding tail is one more segment. Attention
//                is allowed from i to j only when j <= i and segment_ids match.
//
// Packing (default): samples are placed greedily in the given order, each whole in the current row while it
// fits in seq_len, otherwise the row is closed (padded) and the next row starts; every row is exactly seq_len
// tokens. Samples are never split (the dataset reader keeps them <= seq_len). Without packing, each row holds
// one sample and rows are padded to the longest sample of the batch (or to seq_len with pad_to_seq_len).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "data/sample.h"

namespace nvfp4lm {

struct TokenBatch {
  Tensor ids;                   // I32 [B, T]
  Tensor targets;               // I32 [B, T]
  Tensor positions;             // I32 [B, T]
  Tensor segment_ids;           // I32 [B, T]
  int64_t tokens_in_batch = 0;  // targets != kIgnoreIndex: the loss normaliser
  int64_t padding_tokens = 0;
  std::vector<int64_t> sample_indices;  // dataset indices of the samples, in row-major order
  int64_t epoch = 0;                    // the epoch these samples belong to (data_loader.h)
  bool ends_epoch = false;              // the last batch of its epoch

  int64_t rows() const { return ids.defined() ? ids.dim(0) : 0; }
  int64_t row_tokens() const { return ids.defined() ? ids.dim(1) : 0; }
};

// Rows of dataset indices. Packing: appends up to max_rows rows, taking order[begin], order[begin + 1], ...
// greedily; returns the index into `order` of the first sample not placed. Every sample must have
// 1..seq_len tokens (an Error otherwise, naming its source line).
size_t pack_rows(std::span<const Sample> samples, std::span<const int64_t> order, size_t begin, int64_t seq_len,
                 int64_t max_rows, std::vector<std::vector<int64_t>>& rows);
// One sample a row: the same contract with at most one sample per row.
size_t single_rows(std::span<const Sample> samples, std::span<const int64_t> order, size_t begin, int64_t seq_len,
                   int64_t max_rows, std::vector<std::vector<int64_t>>& rows);

// Builds the tensors for `rows` with row_tokens T (>= every row's total length) and fills tokens_in_batch,
// padding_tokens and sample_indices.
TokenBatch assemble_batch(std::span<const Sample> samples, const std::vector<std::vector<int64_t>>& rows,
                          int64_t row_tokens, int32_t pad_id);

}  // namespace nvfp4lm
