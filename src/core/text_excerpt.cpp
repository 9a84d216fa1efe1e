// See text_excerpt.h.
#include "core/text_excerpt.h"

#include <fmt/format.h>

namespace nvfp4lm {
namespace {

// Length of the valid UTF-8 sequence at text[pos] (shortest form not checked: this is for display), or 0.
size_t utf8_length(std::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (length == 0 || pos + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i)
    if ((static_cast<unsigned char>(text[pos + i]) & 0xC0) != 0x80) return 0;
  return length;
}

}  // namespace

std::string quoted_excerpt(std::string_view text, size_t max_chars) {
  std::string out = "\"";
  size_t pos = 0, chars = 0;
  while (pos < text.size() && chars < max_chars) {
    const char c = text[pos];
    const size_t length = utf8_length(text, pos);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (length == 0 || static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", static_cast<unsigned char>(c));
    } else {
      out.append(text.substr(pos, length));
    }
    pos += length == 0 ? 1 : length;
    ++chars;
  }
  out += '"';
  if (pos < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

}  // namespace nvfp4lm
