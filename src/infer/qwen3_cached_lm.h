// CachedLm over a Qwen3Model (model/qwen3_model.h): owns a batch-1 KV cache of a fixed number of tokens and
// feeds prompts (several tokens) through forward_cached. Single-token steps go through a Qwen3DecodeStep when one
// is asked for (model/qwen3_decode_step.h: on CUDA, the whole step replayed as one CUDA graph), else through
// forward_cached too. Logits come back to the CPU as F32 (a copy of one [V] row per call, which also waits for the
// device, so timings around append() are honest on CUDA).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "infer/cached_lm.h"
#include "model/qwen3_decode_step.h"
#include "model/qwen3_model.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

class Qwen3CachedLm : public CachedLm {
 public:
  // The model must outlive this object. capacity_note names where max_tokens came from (for messages).
  // decode: how single-token steps run; none = forward_cached (see the top of this file). adapter: the LoRA adapter
  // of the model's set every token runs with (model/lora_runtime.h), or the base.
  Qwen3CachedLm(const Qwen3Model& model, int64_t max_tokens, std::string capacity_note = {},
                std::optional<DecodeMode> decode = std::nullopt, int adapter = kNoLoraAdapter);

  int64_t vocab_size() const override { return model_.config().vocab_size; }
  int64_t capacity() const override { return cache_.max_tokens(); }
  Device device() const override { return model_.device(); }
  std::string capacity_note() const override;
  bool can_choose() const override { return true; }

  const KVCache& cache() const { return cache_; }
  // "forward_cached", "eager", "CUDA graph of 612 nodes" (for logs and benchmarks).
  std::string decode_path() const;

 protected:
  std::span<const float> forward(std::span<const int32_t> ids, FedTokens fed) override;
  void truncate_cache(int64_t length) override { cache_.set_length(length); }
  int32_t forward_choose(std::span<const int32_t> ids, const TokenChoice& choice, FedTokens fed) override;

 private:
  const Qwen3Model& model_;
  int adapter_ = kNoLoraAdapter;
  KVCache cache_;
  std::unique_ptr<Qwen3DecodeStep> decode_step_;  // refers to cache_ (declared after it)
  std::string capacity_note_;
  // Logits [1, V] F32 of the last position on the model's device (the decode step's own tensor for one token).
  Tensor device_logits(std::span<const int32_t> ids, FedTokens fed);

  Tensor logits_;  // CPU F32 [V], the last row returned
};

// Bytes of weights one decode step reads: every linear (packed codes + block scales for NVFP4), every norm, the
// lm_head (the embedding matrix when tied; `lm_head_bytes` when given: a copy the decode steps read instead) and one
// embedding row.
uint64_t decode_weight_bytes(const Qwen3Weights& weights, std::optional<uint64_t> lm_head_bytes = std::nullopt);
// The same for the model as it decodes (its int8 lm_head copy, if it made one).
uint64_t decode_weight_bytes(const Qwen3Model& model);

// The greedy answer of `model` to one user question, rendered with `chat_template` as generation prompts are
// (encode_generation_prompt, enable_thinking=false), up to max_new_tokens, stopping at an end-of-sequence token;
// with `adapter`, the model's LoRA adapter of that index (model/lora_runtime.h) applied to every token.
std::string answer_greedy(const Qwen3Model& model, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                          const std::string& question, int64_t max_new_tokens = 64, int adapter = kNoLoraAdapter);

}  // namespace nvfp4lm
