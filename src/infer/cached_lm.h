// CachedLm: what generation needs from a model — a causal language model with a KV cache that remembers the
// tokens it holds. append(ids) runs the new tokens at positions length().. and returns the logits of the last
// one; truncate(n) forgets everything after the first n tokens (the chat session keeps the common prefix of two
// turns this way). tokens() is exactly what is in the cache, so callers can compare it with a new prompt.
//
// Qwen3CachedLm (qwen3_cached_lm.h) runs a Qwen3Model; tests use small fakes with hand-made logits.
//
// Choosing where the logits are: a model that can_choose() also offers append_choose(ids, choice), which runs the
// ids and picks the next token with ops/sampling.h where the logits live, so a GPU decode step returns one id
// instead of a row of V floats (600 KB for Qwen3). The Generator uses it on CUDA when the sampling settings allow
// (generator.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"
#include "ops/sampling.h"

namespace nvfp4lm {

// What the ids given to append are: the prompt (any part of it), or generated tokens fed back. A model computes
// prompt positions the same way however the prompt is split into calls, and generated ones with its decode kernels
// (model/qwen3_model.h forward_cached), so an answer does not depend on how its prompt reached the cache.
enum class FedTokens { Prompt, Generated };

// How append_choose picks the next token: the argmax (greedy), or one draw of ops/sampling.h's truncated softmax
// driven by `uniform` in [0, 1). Only ids below `candidates` are considered (the tokenizer's ids when the
// embedding table is padded past them).
struct TokenChoice {
  bool greedy = true;
  TopKTopP sampling;
  float uniform = 0.f;
  int64_t candidates = 0;  // (0, vocab_size()]
};

class CachedLm {
 public:
  virtual ~CachedLm() = default;

  virtual int64_t vocab_size() const = 0;
  // Tokens the cache can hold.
  virtual int64_t capacity() const = 0;
  // Where the computation runs (for memory reporting).
  virtual Device device() const { return Device::cpu(); }

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t length() const { return static_cast<int64_t>(tokens_.size()); }

  // Runs `ids` (at least one) after the cached tokens; returns F32 logits of the last one, vocab_size() values,
  // valid until the next call. Throws Error when the cache would overflow.
  std::span<const float> append(std::span<const int32_t> ids, FedTokens fed = FedTokens::Prompt);
  // Whether append_choose is available.
  virtual bool can_choose() const { return false; }
  // Where tokens are best chosen when the settings allow either: in the model when it can and runs on CUDA (the
  // logits then stay there), else on a host copy. Generation (TokenChoicePlace::Auto) and `bench infer` follow it.
  bool prefers_choosing() const { return can_choose() && device().is_cuda(); }
  // append(ids), then the next token chosen as `choice` says where the logits are. Error when !can_choose().
  int32_t append_choose(std::span<const int32_t> ids, const TokenChoice& choice, FedTokens fed = FedTokens::Prompt);
  // Keeps the first `length` tokens (0 <= length <= length()).
  void truncate(int64_t length);
  // For messages: what bounds the capacity, e.g. "the KV cache of 4096 tokens (--context)".
  virtual std::string capacity_note() const;

 protected:
  // append() without the bookkeeping: positions start at length().
  virtual std::span<const float> forward(std::span<const int32_t> ids, FedTokens fed) = 0;
  virtual void truncate_cache(int64_t length) = 0;
  // append_choose() without the bookkeeping (only called when can_choose()).
  virtual int32_t forward_choose(std::span<const int32_t> ids, const TokenChoice& choice, FedTokens fed);

 private:
  // The checks append and append_choose share: at least one id, and room for them in the cache.
  void check_room(const char* op, std::span<const int32_t> ids) const;

  std::vector<int32_t> tokens_;
};

}  // namespace nvfp4lm
