// Internal: reads a tokenizer.json text in one SAX pass. model.vocab and model.merges (nearly all of the
// ~11 MB of a Qwen3 file) go straight into compact pools; everything else (normalizer, pre_tokenizer,
// added_tokens, decoder, ...) into a small nlohmann DOM in which vocab and merges are null.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nvfp4lm::tokenizer {

inline constexpr int64_t kMaxTokenId = 1 << 24;  // a sanity bound: no real vocabulary has 16M tokens

struct PoolSpan {
  uint32_t offset;
  uint32_t length;
};

struct TokenizerJsonParts {
  nlohmann::json rest;
  std::string vocab_pool;                           // token texts back to back
  std::vector<std::pair<PoolSpan, int64_t>> vocab;  // (text, id), file order
  std::string merges_pool;
  std::vector<std::pair<PoolSpan, PoolSpan>> merges;  // (left, right), rank order
  bool has_vocab = false;
  bool has_merges = false;

  std::string_view vocab_text(PoolSpan s) const { return std::string_view(vocab_pool).substr(s.offset, s.length); }
  std::string_view merge_text(PoolSpan s) const { return std::string_view(merges_pool).substr(s.offset, s.length); }
};

// Throws Error naming `origin` for invalid JSON or a malformed vocab / merges entry. Merges may be
// [["a", "b"], ...] or the older ["a b", ...].
TokenizerJsonParts read_tokenizer_json(std::string_view text, const std::string& origin);

}  // namespace nvfp4lm::tokenizer
