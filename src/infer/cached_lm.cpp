// See cached_lm.h.
#include "infer/cached_lm.h"

#include <fmt/format.h>

#include "core/error.h"

namespace nvfp4lm {

std::span<const float> CachedLm::append(std::span<const int32_t> ids) {
  NVFP4LM_ASSERT(!ids.empty(), "CachedLm::append needs at least one token");
  NVFP4LM_CHECK(length() + static_cast<int64_t>(ids.size()) <= capacity(),
                "context full: {} cached + {} new tokens exceed {}", length(), ids.size(), capacity_note());
  std::span<const float> logits = forward(ids);
  NVFP4LM_ASSERT(static_cast<int64_t>(logits.size()) == vocab_size(), "logits row has {} values, vocabulary {}",
                 logits.size(), vocab_size());
  tokens_.insert(tokens_.end(), ids.begin(), ids.end());
  return logits;
}

void CachedLm::truncate(int64_t length) {
  NVFP4LM_ASSERT(length >= 0 && length <= this->length(), "truncate to {} of {}", length, this->length());
  truncate_cache(length);
  tokens_.resize(static_cast<size_t>(length));
}

std::string CachedLm::capacity_note() const { return fmt::format("the context of {} tokens", capacity()); }

}  // namespace nvfp4lm
