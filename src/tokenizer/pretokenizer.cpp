// PCRE2 wrapper for the pre-tokenizer regex. Match data is created per split() call, so one compiled
// pattern serves any number of threads.
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "core/logging.h"

namespace nvfp4lm::tokenizer {
namespace {

constexpr std::string_view kWhiteSpaceClassBody =
    R"(\t\n\x0B\f\r\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

pcre2_code* as_code(void* p) { return static_cast<pcre2_code*>(p); }

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// One match [begin, end) found at or after `pos`: the text between `gap` and the match is a piece, then the match;
// `pos` moves past it and `gap` to its end. An empty match (not possible with the Qwen/GPT-2 patterns) steps over one
// character, which stays in the gap and joins the next gap piece, as HF does.
void take_match(std::string_view text, size_t begin, size_t end, size_t& pos, size_t& gap, std::vector<Piece>& pieces) {
  if (begin > gap) pieces.push_back({static_cast<uint32_t>(gap), static_cast<uint32_t>(begin)});
  if (end > begin) {
    pieces.push_back({static_cast<uint32_t>(begin), static_cast<uint32_t>(end)});
    pos = end;
  } else {
    pos = end + 1;
    while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
    end = begin;
  }
  gap = end;
}

}  // namespace

std::string rewrite_whitespace_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 256);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char next = pattern[i + 1];
      if (next == 's') {
        if (in_class) {
          out.append(kWhiteSpaceClassBody);
        } else {
          out.append("[").append(kWhiteSpaceClassBody).append("]");
        }
        ++i;
        continue;
      }
      if (next == 'S' && !in_class) {  // \S inside a class cannot be spelled out; PCRE2's is kept there
        out.append("[^").append(kWhiteSpaceClassBody).append("]");
        ++i;
        continue;
      }
      out.push_back(c);
      out.push_back(next);
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.push_back(pattern[++i]);
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out.push_back(pattern[++i]);
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
  }
  return out;
}

RegexSplitter::RegexSplitter(std::string_view pattern, const std::string& origin)
    : pattern_(rewrite_whitespace_classes(pattern)) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error_code, &error_offset, nullptr);
  NVFP4LM_CHECK(code != nullptr, "{}: regex {} does not compile with PCRE2 at offset {}: {}", origin, pattern,
                error_offset, pcre2_message(error_code));
  code_ = code;
  int rc = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
  jit_ = rc == 0;
  if (!jit_) log::debug("tokenizer: PCRE2 JIT unavailable ({}); using the PCRE2 interpreter", pcre2_message(rc));
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(as_code(code_)); }

void RegexSplitter::split(std::string_view text, std::vector<Piece>& pieces) const {
  NVFP4LM_ASSERT(text.size() < (1ull << 32), "text too long for 32-bit offsets");
  if (text.empty()) return;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(as_code(code_), nullptr);
  NVFP4LM_CHECK(match != nullptr, "out of memory creating PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;  // where the next search starts
  size_t gap = 0;  // start of text not yet covered by a piece
  while (pos < text.size()) {
    int rc = pcre2_match(as_code(code_), subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(match);
      NVFP4LM_FAIL("tokenizer: PCRE2 match failed at byte {}: {}", pos, pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    take_match(text, ovector[0], ovector[1], pos, gap, pieces);
  }
  if (gap < text.size()) pieces.push_back({static_cast<uint32_t>(gap), static_cast<uint32_t>(text.size())});
  pcre2_match_data_free(match);
}

size_t RegexSplitter::split_certain(std::string_view text, size_t from, bool more_follows, size_t max_pieces,
                                    std::vector<Piece>& pieces, size_t& open_match) const {
  NVFP4LM_ASSERT(text.size() < (1ull << 32), "text too long for 32-bit offsets");
  open_match = SIZE_MAX;
  if (from >= text.size() || max_pieces == 0) return from;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(as_code(code_), nullptr);
  NVFP4LM_CHECK(match != nullptr, "out of memory creating PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const uint32_t options = PCRE2_NO_UTF_CHECK | (more_follows ? PCRE2_PARTIAL_HARD : 0);
  const size_t first = pieces.size();
  size_t pos = from, gap = from, done = from;  // `done`: end of the last appended piece
  bool no_match_left = false;
  while (pos < text.size() && pieces.size() - first < max_pieces) {
    int rc = pcre2_match(as_code(code_), subject, text.size(), pos, options, match, nullptr);
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    if (rc == PCRE2_ERROR_PARTIAL) {
      open_match = ovector[0];
      break;
    }
    if (rc == PCRE2_ERROR_NOMATCH) {
      no_match_left = true;
      break;
    }
    if (rc < 0) {
      pcre2_match_data_free(match);
      NVFP4LM_FAIL("tokenizer: PCRE2 match failed at byte {}: {}", pos, pcre2_message(rc));
    }
    // An empty match steps as in split(); a later call from `done` (== gap) searches again and steps the same way.
    take_match(text, ovector[0], ovector[1], pos, gap, pieces);
    done = gap;
  }
  // The text after the last match is one piece, known only when nothing follows the window.
  if (!more_follows && (no_match_left || pos >= text.size()) && gap < text.size()) {
    pieces.push_back({static_cast<uint32_t>(gap), static_cast<uint32_t>(text.size())});
    done = text.size();
  }
  pcre2_match_data_free(match);
  return done;
}

}  // namespace nvfp4lm::tokenizer
