// CachedLm over a Qwen3Model (model/qwen3_model.h): owns a batch-1 KV cache of a fixed number of tokens and
// feeds it through forward_cached. Logits come back to the CPU as F32 (a copy of one [V] row per call, which also
// waits for the device, so timings around append() are honest on CUDA).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "infer/cached_lm.h"
#include "model/qwen3_model.h"

namespace nvfp4lm {

class Qwen3CachedLm : public CachedLm {
 public:
  // The model must outlive this object. capacity_note names where max_tokens came from (for messages).
  Qwen3CachedLm(const Qwen3Model& model, int64_t max_tokens, std::string capacity_note = {});

  int64_t vocab_size() const override { return model_.config().vocab_size; }
  int64_t capacity() const override { return cache_.max_tokens(); }
  Device device() const override { return model_.device(); }
  std::string capacity_note() const override;

  const KVCache& cache() const { return cache_; }

 protected:
  std::span<const float> forward(std::span<const int32_t> ids) override;
  void truncate_cache(int64_t length) override { cache_.set_length(length); }

 private:
  const Qwen3Model& model_;
  KVCache cache_;
  std::string capacity_note_;
  Tensor logits_;  // CPU F32 [V], the last row returned
};

// Bytes of weights one decode step reads: every linear (packed codes + block scales for NVFP4), every norm, the
// lm_head (the embedding matrix when tied) and one embedding row.
uint64_t decode_weight_bytes(const Qwen3Weights& weights);

// The context a model allows: max_position_embeddings from its config.
inline int64_t model_context_limit(const Qwen3Model& model) { return model.config().max_position_embeddings; }

}  // namespace nvfp4lm
