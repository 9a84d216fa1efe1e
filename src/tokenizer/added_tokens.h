// Added tokens (tokenizer.json "added_tokens"): strings that are cut out of the text before
// normalisation and pre-tokenisation and become one id each, as HF's AddedVocabulary does: leftmost-
// longest matching; tokens with normalized=false are matched in the raw text, normalized=true ones in each
// normalised remaining segment; lstrip/rstrip swallow the whitespace before/after a match; single_word
// requires no word character on either side. With `split_special` (HF's encode_special_tokens), tokens
// with special=true are not matched (they are encoded as ordinary text) while other added tokens still are.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nvfp4lm::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

struct AddedMatch {
  uint32_t begin;  // byte range of the text the token replaces (including stripped whitespace)
  uint32_t end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }

  // Appends the accepted matches in `text` (valid UTF-8), in order and non-overlapping.
  void find(std::string_view text, bool split_special, std::vector<AddedMatch>& out) const;

  // Where a scan of one text stands: find_next continues from it, so the matches come one at a time (each
  // costs the bytes scanned up to it, nothing is stored) and are the same as find's.
  struct MatchCursor {
    size_t pos = 0;      // the next byte to try
    size_t covered = 0;  // end of the previous accepted match (lstrip stops there)
  };
  std::optional<AddedMatch> find_next(std::string_view text, bool split_special, MatchCursor& cursor) const;

 private:
  std::vector<AddedToken> tokens_;                    // sorted by content length, longest first
  std::vector<std::vector<uint32_t>> by_first_byte_;  // 256 buckets of indices into tokens_
};

// Unicode White_Space (what Rust's char::is_whitespace tests), for lstrip/rstrip.
bool is_white_space(char32_t cp);

}  // namespace nvfp4lm::tokenizer
