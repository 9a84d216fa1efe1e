// See cached_lm.h.
#include "infer/cached_lm.h"

#include <fmt/format.h>

#include "core/error.h"

namespace nvfp4lm {

void CachedLm::check_room(const char* op, std::span<const int32_t> ids) const {
  NVFP4LM_ASSERT(!ids.empty(), "CachedLm::{} needs at least one token", op);
  NVFP4LM_CHECK(length() + static_cast<int64_t>(ids.size()) <= capacity(),
                "context full: {} cached + {} new tokens exceed {}", length(), ids.size(), capacity_note());
}

std::span<const float> CachedLm::append(std::span<const int32_t> ids, FedTokens fed) {
  check_room("append", ids);
  std::span<const float> logits = forward(ids, fed);
  NVFP4LM_ASSERT(static_cast<int64_t>(logits.size()) == vocab_size(), "logits row has {} values, vocabulary {}",
                 logits.size(), vocab_size());
  tokens_.insert(tokens_.end(), ids.begin(), ids.end());
  return logits;
}

int32_t CachedLm::append_choose(std::span<const int32_t> ids, const TokenChoice& choice, FedTokens fed) {
  check_room("append_choose", ids);
  NVFP4LM_ASSERT(can_choose(), "CachedLm::append_choose on a model that cannot choose tokens itself");
  NVFP4LM_ASSERT(choice.candidates > 0 && choice.candidates <= vocab_size(), "append_choose: {} candidates of {}",
                 choice.candidates, vocab_size());
  const int32_t token = forward_choose(ids, choice, fed);
  NVFP4LM_ASSERT(token >= 0 && token < choice.candidates, "append_choose picked {} of {} candidates", token,
                 choice.candidates);
  tokens_.insert(tokens_.end(), ids.begin(), ids.end());
  return token;
}

int32_t CachedLm::forward_choose(std::span<const int32_t>, const TokenChoice&, FedTokens) {
  NVFP4LM_FAIL("CachedLm::forward_choose is not implemented by this model");
}

void CachedLm::truncate(int64_t length) {
  NVFP4LM_ASSERT(length >= 0 && length <= this->length(), "truncate to {} of {}", length, this->length());
  truncate_cache(length);
  tokens_.resize(static_cast<size_t>(length));
}

std::string CachedLm::capacity_note() const { return fmt::format("the context of {} tokens", capacity()); }

}  // namespace nvfp4lm
