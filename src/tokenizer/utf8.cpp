// UTF-8 validation follows the Unicode "well-formed byte sequences" table (Table 3-7): the second
// byte's range depends on the lead byte (E0: A0..BF, ED: 80..9F, F0: 90..BF, F4: 80..8F), which
// excludes overlongs, surrogates and code points above U+10FFFF.
#include "tokenizer/utf8.h"

namespace nvfp4lm::tokenizer {
namespace {

// Expected total length for a lead byte and the allowed range of the second byte; length 0 = invalid.
struct LeadInfo {
  uint8_t length;
  uint8_t second_lo;
  uint8_t second_hi;
};

LeadInfo lead_info(uint8_t lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead < 0xC2) return {0, 0, 0};
  if (lead < 0xE0) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead < 0xF0) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead < 0xF4) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of bytes from pos that form a valid prefix of a sequence (at least 1 for a bad lead byte:
// the maximal invalid subpart is then that single byte).
size_t valid_prefix_length(std::string_view text, size_t pos, LeadInfo info) {
  size_t n = 1;
  if (info.length == 0) return 1;
  for (; n < info.length && pos + n < text.size(); ++n) {
    uint8_t byte = static_cast<uint8_t>(text[pos + n]);
    uint8_t lo = n == 1 ? info.second_lo : 0x80;
    uint8_t hi = n == 1 ? info.second_hi : 0xBF;
    if (byte < lo || byte > hi) break;
  }
  return n;
}

}  // namespace

size_t utf8_sequence_length(std::string_view text, size_t pos) {
  uint8_t lead = static_cast<uint8_t>(text[pos]);
  if (lead < 0x80) return 1;
  LeadInfo info = lead_info(lead);
  if (info.length == 0 || pos + info.length > text.size()) return 0;
  return valid_prefix_length(text, pos, info) == info.length ? info.length : 0;
}

size_t skip_ascii(std::string_view text, size_t pos) {
  const size_t size = text.size();
  while (pos + 8 <= size) {
    uint64_t word;
    __builtin_memcpy(&word, text.data() + pos, 8);
    if (word & 0x8080808080808080ull) break;
    pos += 8;
  }
  while (pos < size && static_cast<uint8_t>(text[pos]) < 0x80) ++pos;
  return pos;
}

size_t find_invalid_utf8(std::string_view text) {
  size_t pos = 0;
  const size_t size = text.size();
  while ((pos = skip_ascii(text, pos)) < size) {
    size_t n = utf8_sequence_length(text, pos);
    if (n == 0) return pos;
    pos += n;
  }
  return size;
}

std::string to_valid_utf8(std::string_view text) {
  size_t first_bad = find_invalid_utf8(text);
  if (first_bad == text.size()) return std::string(text);
  std::string out(text.substr(0, first_bad));
  size_t pos = first_bad;
  while (pos < text.size()) {
    size_t n = utf8_sequence_length(text, pos);
    if (n > 0) {
      out.append(text.substr(pos, n));
      pos += n;
      continue;
    }
    out.append("\xEF\xBF\xBD");
    pos += valid_prefix_length(text, pos, lead_info(static_cast<uint8_t>(text[pos])));
  }
  return out;
}

char32_t decode_utf8(std::string_view text, size_t& pos) {
  uint8_t lead = static_cast<uint8_t>(text[pos]);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  if (lead < 0xE0) {
    char32_t cp = ((lead & 0x1Fu) << 6) | (static_cast<uint8_t>(text[pos + 1]) & 0x3Fu);
    pos += 2;
    return cp;
  }
  if (lead < 0xF0) {
    char32_t cp = ((lead & 0x0Fu) << 12) | ((static_cast<uint8_t>(text[pos + 1]) & 0x3Fu) << 6) |
                  (static_cast<uint8_t>(text[pos + 2]) & 0x3Fu);
    pos += 3;
    return cp;
  }
  char32_t cp = ((lead & 0x07u) << 18) | ((static_cast<uint8_t>(text[pos + 1]) & 0x3Fu) << 12) |
                ((static_cast<uint8_t>(text[pos + 2]) & 0x3Fu) << 6) | (static_cast<uint8_t>(text[pos + 3]) & 0x3Fu);
  pos += 4;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t incomplete_utf8_suffix(std::string_view text) {
  // A sequence is at most 4 bytes, so only a lead byte among the last 3 can start an unfinished one.
  size_t size = text.size();
  for (size_t back = 1; back <= 3 && back <= size; ++back) {
    size_t pos = size - back;
    uint8_t byte = static_cast<uint8_t>(text[pos]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation byte: keep looking for its lead
    LeadInfo info = lead_info(byte);
    if (info.length <= back) return 0;  // ASCII, invalid lead, or already complete
    return valid_prefix_length(text, pos, info) == back ? back : 0;
  }
  return 0;
}

}  // namespace nvfp4lm::tokenizer
