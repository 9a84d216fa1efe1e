// See kv_cache.h. The cache is allocated uninitialised: attention only reads positions [0, length + new tokens),
// all of which the forward writes before reading, and leaving the pages untouched keeps a large context cheap
// until it is used.
#include "model/kv_cache.h"

namespace nvfp4lm {

KVCache::KVCache(const Qwen3Config& config, int64_t batch, int64_t max_tokens, DType dtype, Device device)
    : batch_(batch), max_tokens_(max_tokens) {
  NVFP4LM_CHECK(batch >= 1, "KV cache: batch size {} must be at least 1", batch);
  NVFP4LM_CHECK(max_tokens >= 1, "KV cache: context length {} must be at least 1 token", max_tokens);
  const Shape shape{batch, max_tokens, config.num_key_value_heads, config.head_dim};
  keys_.reserve(static_cast<size_t>(config.num_hidden_layers));
  values_.reserve(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    keys_.push_back(Tensor::empty(shape, dtype, device));
    values_.push_back(Tensor::empty(shape, dtype, device));
  }
}

void KVCache::set_length(int64_t length) {
  NVFP4LM_ASSERT(length >= 0 && length <= max_tokens_, "KV cache length {} outside [0, {}]", length, max_tokens_);
  length_ = length;
}

KVCache KVCache::row_view(int64_t row) {
  NVFP4LM_ASSERT(row >= 0 && row < batch_, "KV cache row {} outside [0, {})", row, batch_);
  KVCache view;
  view.batch_ = 1;
  view.max_tokens_ = max_tokens_;
  for (const Tensor& t : keys_) view.keys_.push_back(t.narrow(0, row, 1));
  for (const Tensor& t : values_) view.values_.push_back(t.narrow(0, row, 1));
  return view;
}

size_t KVCache::nbytes() const {
  size_t bytes = 0;
  for (const Tensor& t : keys_) bytes += t.nbytes();
  for (const Tensor& t : values_) bytes += t.nbytes();
  return bytes;
}

}  // namespace nvfp4lm
