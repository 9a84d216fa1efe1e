// A training sample (token ids + loss mask) and the next-token targets it yields.
//
// Mask convention: train_mask[t] = 1 means "compute the loss on PREDICTING token t", i.e. on the output of
// position t - 1. The model at position t sees ids[0..t] and is scored on ids[t + 1], so:
//
//   targets[t] = train_mask[t + 1] ? ids[t + 1] : kIgnoreIndex      for 0 <= t < n - 1
//   targets[n - 1] = kIgnoreIndex                                    (nothing follows the sample's last token)
//
// train_mask[0] is therefore never used (no position predicts the first token). Example, the chat
// [user: "Hi", assistant: "Hello"] as encode_chat renders it (Instruct2507 template; built by hand in
// tests/train/test_data_formats.cpp), with S = <|im_start|>, E = <|im_end|>:
//   t      :  0     1     2     3     4     5     6     7          8      9      10    11
//   ids    :  S     user  \n    Hi    E     \n    S     assistant  \n     Hello  E     \n
//   mask   :  0     0     0     0     0     0     0     0          0      1      1     0
//   target :  -100  -100  -100  -100  -100  -100  -100  -100       Hello  E      -100  -100
// so the loss covers exactly the assistant's words and the <|im_end|> that ends its turn, never the "\n" after
// it. Samples are kept at most seq_len tokens long (dataset.h); a packed row never lets a target cross into the
// next sample (batch.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nvfp4lm {

struct Sample {
  std::vector<int32_t> ids;
  std::vector<uint8_t> train_mask;  // same length as ids; 1 = compute the loss on predicting this token
  int64_t source_line = 0;          // 1-based line of the file it came from (entry number for a JSON array)
};

// targets as above, one per token (ids.size() of them). train_mask must have ids.size() entries.
std::vector<int32_t> next_token_targets(const Sample& sample);
// Writes the same into `targets` (ids.size() entries), for batch assembly without a temporary.
void write_next_token_targets(const Sample& sample, std::span<int32_t> targets);

// Number of targets that carry loss: positions 1..n-1 with train_mask 1.
int64_t trained_token_count(const Sample& sample);

}  // namespace nvfp4lm
