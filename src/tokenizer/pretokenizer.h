// Pre-tokenisation: HF's Split pre-tokenizer with behavior "Isolated" (every regex match is a piece and
// so is every gap between matches), run with PCRE2 in UTF-8 + Unicode-property mode, JIT-compiled when
// the PCRE2 build has a JIT (otherwise the interpreter, logged at debug level).
//
// HF tokenizers runs these patterns with Oniguruma, whose \s is Unicode White_Space (TAB..CR, space,
// U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000). PCRE2's \s with
// PCRE2_UCP also matches U+180E, so the pattern is rewritten to spell \s and \S out as that exact class.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nvfp4lm::tokenizer {

struct Piece {
  uint32_t begin;  // byte offsets into the split text
  uint32_t end;
};

class RegexSplitter {
 public:
  // Throws Error (naming `origin`, e.g. "tokenizer.json pre_tokenizer") when the pattern does not compile.
  RegexSplitter(std::string_view pattern, const std::string& origin);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends the pieces of `text` (valid UTF-8, < 4 GiB) to `pieces`, in order, covering all of it.
  void split(std::string_view text, std::vector<Piece>& pieces) const;

  // For encoding a prefix of a text that is read window by window: appends, from byte `from` (a piece
  // boundary) on, the pieces of `text` that no text after it could change, and at most `max_pieces` of them.
  // With more_follows=false the window is the whole text and the pieces reach its end. PCRE2 runs in
  // partial-hard mode, so a match that looked at the window's end is not taken. Returns where the appended
  // pieces end; `open_match` is set to where such an unfinished match starts (SIZE_MAX when none).
  size_t split_certain(std::string_view text, size_t from, bool more_follows, size_t max_pieces,
                       std::vector<Piece>& pieces, size_t& open_match) const;

  bool jit() const { return jit_; }

 private:
  std::string pattern_;   // after the \s rewrite
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

// The \s / \S rewrite described above (exposed for tests).
std::string rewrite_whitespace_classes(std::string_view pattern);

// The Qwen2/Qwen3 pre-tokenizer pattern, and GPT-2's (used by a ByteLevel pre-tokenizer with use_regex).
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace nvfp4lm::tokenizer
