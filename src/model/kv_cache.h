// Key/value cache for generation: per layer K and V of shape [B, max_tokens, kv_heads, head_dim] in the model's
// compute dtype on its device, keys stored after QK-norm and RoPE. length() tokens are valid for every row of
// the batch (rows advance together). A pool of sequence slots (infer/batch_engine.h) uses the rows separately:
// row_view(b) is a batch-1 cache over row b's storage for prefilling one sequence, and batched decode steps read
// each row at its own length (model/qwen3_decode_step.h run_rows); the pool's own length() is then unused.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "io/hf_config.h"

namespace nvfp4lm {

class KVCache {
 public:
  KVCache() = default;
  KVCache(const Qwen3Config& config, int64_t batch, int64_t max_tokens, DType dtype, Device device);

  int64_t batch() const { return batch_; }
  int64_t max_tokens() const { return max_tokens_; }
  int64_t length() const { return length_; }
  void set_length(int64_t length);  // e.g. to drop tokens after a stop (asserts 0 <= length <= max)
  void reset() { length_ = 0; }
  // A batch-1 cache sharing row `row`'s storage (writes through it land in this cache), of length 0.
  KVCache row_view(int64_t row);

  Tensor& keys(int layer) { return keys_[static_cast<size_t>(layer)]; }
  Tensor& values(int layer) { return values_[static_cast<size_t>(layer)]; }
  const Tensor& keys(int layer) const { return keys_[static_cast<size_t>(layer)]; }
  const Tensor& values(int layer) const { return values_[static_cast<size_t>(layer)]; }
  size_t nbytes() const;

 private:
  int64_t batch_ = 0, max_tokens_ = 0, length_ = 0;
  std::vector<Tensor> keys_, values_;
};

}  // namespace nvfp4lm
