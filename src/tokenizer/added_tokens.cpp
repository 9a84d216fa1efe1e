// Matching is a first-byte bucket lookup followed by memcmp against that bucket's tokens (longest
// first): tokenizers have tens of added tokens, so this is as fast as an automaton and simpler.
#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

#include "tokenizer/utf8.h"

namespace nvfp4lm::tokenizer {
namespace {

// The code point that ends just before byte `pos` (pos > 0, text valid UTF-8); sets `start` to its offset.
char32_t code_point_before(std::string_view text, size_t pos, size_t& start) {
  start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  size_t p = start;
  return decode_utf8(text, p);
}

// Approximation of Rust's is_alphanumeric || '_' (only used for single_word, which Qwen files don't set):
// ASCII letters, digits, '_' and every non-ASCII code point that is not white space.
bool is_word_char(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  return !is_white_space(cp);
}

}  // namespace

bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::erase_if(tokens_, [](const AddedToken& t) { return t.content.empty(); });
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  by_first_byte_.resize(256);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(static_cast<uint32_t>(i));
  }
}

void AddedTokenMatcher::find(std::string_view text, bool split_special, std::vector<AddedMatch>& out) const {
  MatchCursor cursor;
  while (const std::optional<AddedMatch> match = find_next(text, split_special, cursor)) out.push_back(*match);
}

std::optional<AddedMatch> AddedTokenMatcher::find_next(std::string_view text, bool split_special,
                                                       MatchCursor& cursor) const {
  if (tokens_.empty()) return std::nullopt;
  size_t& pos = cursor.pos;
  while (pos < text.size()) {
    const auto& bucket = by_first_byte_[static_cast<unsigned char>(text[pos])];
    const AddedToken* hit = nullptr;
    for (uint32_t index : bucket) {
      const AddedToken& token = tokens_[index];
      if (token.content.size() <= text.size() - pos &&
          std::memcmp(text.data() + pos, token.content.data(), token.content.size()) == 0) {
        hit = &token;
        break;  // longest first
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + hit->content.size();
    pos = end;  // matches never overlap, even rejected ones (HF iterates non-overlapping matches)
    if (split_special && hit->special) continue;
    if (hit->single_word) {
      size_t unused = 0;
      bool word_before = begin > 0 && is_word_char(code_point_before(text, begin, unused));
      size_t after = end;
      bool word_after = end < text.size() && is_word_char(decode_utf8(text, after));
      if (word_before || word_after) continue;
    }
    if (hit->lstrip) {
      while (begin > cursor.covered) {
        size_t start = 0;
        if (!is_white_space(code_point_before(text, begin, start))) break;
        begin = start;
      }
    }
    if (hit->rstrip) {
      while (end < text.size()) {
        size_t next = end;
        if (!is_white_space(decode_utf8(text, next))) break;
        end = next;
      }
      pos = end;
    }
    cursor.covered = end;
    return AddedMatch{static_cast<uint32_t>(begin), static_cast<uint32_t>(end), hit->id};
  }
  return std::nullopt;
}

}  // namespace nvfp4lm::tokenizer
