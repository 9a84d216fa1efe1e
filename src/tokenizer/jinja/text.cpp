// See text.h.
#include "tokenizer/jinja/text.h"

#include <algorithm>

#include "tokenizer/jinja/value.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm::jinja {
namespace {

// Simple case mapping of ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (what Python's str.upper/lower
// do there, apart from the few letters that expand, like "ß" -> "SS", which stay as they are).
uint32_t upper_of(uint32_t c) {
  if (c == 0x130 || c == 0x131) return c;  // Turkish dotted / dotless i: Python maps them outside the pair rule
  if ((c >= 'a' && c <= 'z') || (c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c & ~1u;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

uint32_t lower_of(uint32_t c) {
  if (c == 0x130 || c == 0x131) return c;
  if ((c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c == 0x178) return 0xFF;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c | 1u;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool is_cased(uint32_t c) { return upper_of(c) != c || lower_of(c) != c; }

std::vector<uint32_t> decode(const std::string& text) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = byte < 0x80 ? 1 : byte < 0xE0 ? 2 : byte < 0xF0 ? 3 : 4;
    uint32_t c = length == 1 ? byte : byte & (0x3F >> (length - 1));
    for (size_t k = 1; k < length && i + k < text.size(); ++k) c = (c << 6) | (text[i + k] & 0x3F);
    out.push_back(c);
    i += length;
  }
  return out;
}

std::string encode(const std::vector<uint32_t>& cps) {
  std::string out;
  for (const uint32_t c : cps) tokenizer::append_utf8(out, static_cast<char32_t>(c));
  return out;
}

// The code points Python's str.isspace() accepts, as UTF-8.
bool is_python_space(std::string_view cp) {
  static constexpr std::string_view spaces[] = {" ",
                                                "\t",
                                                "\n",
                                                "\v",
                                                "\f",
                                                "\r",
                                                "\x1c",
                                                "\x1d",
                                                "\x1e",
                                                "\x1f",
                                                "\xc2\x85",
                                                "\xc2\xa0",
                                                "\xe1\x9a\x80",
                                                "\xe2\x80\xa8",
                                                "\xe2\x80\xa9",
                                                "\xe2\x80\xaf",
                                                "\xe2\x81\x9f",
                                                "\xe3\x80\x80"};
  if (std::find(std::begin(spaces), std::end(spaces), cp) != std::end(spaces)) return true;
  // U+2000..U+200A
  return cp.size() == 3 && cp[0] == '\xe2' && cp[1] == '\x80' && static_cast<unsigned char>(cp[2]) >= 0x80 &&
         static_cast<unsigned char>(cp[2]) <= 0x8a;
}

std::vector<std::string_view> code_points(const std::string& text) {
  const std::vector<size_t> offsets = code_point_offsets(text);
  std::vector<std::string_view> out;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    out.emplace_back(text.data() + offsets[i], offsets[i + 1] - offsets[i]);
  }
  return out;
}

}  // namespace

std::string upper(const std::string& text) {
  std::vector<uint32_t> cps;
  for (const uint32_t c : decode(text)) {
    if (c == 0xDF) {  // "ß" -> "SS", the one expansion in these scripts
      cps.insert(cps.end(), {'S', 'S'});
    } else {
      cps.push_back(upper_of(c));
    }
  }
  return encode(cps);
}

std::string lower(const std::string& text) {
  std::vector<uint32_t> cps = decode(text);
  for (uint32_t& c : cps) c = lower_of(c);
  return encode(cps);
}

std::string capitalize(const std::string& text) {
  std::vector<uint32_t> cps = decode(text);
  for (size_t i = 0; i < cps.size(); ++i) cps[i] = i == 0 ? upper_of(cps[i]) : lower_of(cps[i]);
  return encode(cps);
}

// A cased letter after a cased letter is lowered, any other is raised (Python's rule).
std::string title(const std::string& text) {
  std::vector<uint32_t> cps = decode(text);
  bool previous_cased = false;
  for (uint32_t& c : cps) {
    const bool cased = is_cased(c);
    if (cased) c = previous_cased ? lower_of(c) : upper_of(c);
    previous_cased = cased;
  }
  return encode(cps);
}

std::string strip(const std::string& text, const std::string* chars, bool left, bool right) {
  const std::vector<std::string_view> cps = code_points(text);
  const std::vector<std::string_view> set = chars ? code_points(*chars) : std::vector<std::string_view>{};
  const auto strippable = [&](std::string_view cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : is_python_space(cp);
  };
  size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && strippable(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strippable(cps[end - 1])) --end;
  }
  if (begin == end) return {};
  const size_t from = static_cast<size_t>(cps[begin].data() - text.data());
  const size_t to = static_cast<size_t>(cps[end - 1].data() - text.data()) + cps[end - 1].size();
  return text.substr(from, to - from);
}

std::string replace(const std::string& text, const std::string& old, const std::string& replacement, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts the replacement around every code point
    const std::vector<std::string_view> cps = code_points(text);
    int64_t done = 0;
    for (const std::string_view cp : cps) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      out += cp;
    }
    if (count < 0 || done < count) out += replacement;
    return out;
  }
  size_t at = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    const size_t found = text.find(old, at);
    if (found == std::string::npos) break;
    out += text.substr(at, found - at) + replacement;
    at = found + old.size();
  }
  return out + text.substr(at);
}

std::vector<std::string> split_whitespace(const std::string& text, int64_t max_split) {
  std::vector<std::string> out;
  std::string current;
  bool in_word = false;
  const std::vector<std::string_view> cps = code_points(text);
  for (size_t i = 0; i < cps.size(); ++i) {
    if (max_split >= 0 && static_cast<int64_t>(out.size()) == max_split && !in_word && !is_python_space(cps[i])) {
      // The last item is the rest of the string, its trailing whitespace kept (as Python does).
      std::string rest;
      for (size_t j = i; j < cps.size(); ++j) rest += cps[j];
      out.push_back(std::move(rest));
      return out;
    }
    if (is_python_space(cps[i])) {
      if (in_word) out.push_back(std::move(current));
      current.clear();
      in_word = false;
    } else {
      current += cps[i];
      in_word = true;
    }
  }
  if (in_word) out.push_back(std::move(current));
  return out;
}

std::vector<std::string> split(const std::string& text, const std::string& separator, int64_t max_split) {
  std::vector<std::string> out;
  size_t at = 0;
  while (max_split < 0 || static_cast<int64_t>(out.size()) < max_split) {
    const size_t found = text.find(separator, at);
    if (found == std::string::npos) break;
    out.push_back(text.substr(at, found - at));
    at = found + separator.size();
  }
  out.push_back(text.substr(at));
  return out;
}

std::string indent(const std::string& text, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t at = 0;
  bool first_line = true;
  while (at <= text.size()) {
    const size_t newline = text.find('\n', at);
    const size_t end = newline == std::string::npos ? text.size() : newline;
    const std::string line = text.substr(at, end - at);
    const bool padded = (!first_line || first) && (blank || !strip(line, nullptr, true, true).empty());
    out += (padded ? pad : "") + line;
    if (newline == std::string::npos) break;
    out += '\n';
    at = newline + 1;
    first_line = false;
  }
  return out;
}

}  // namespace nvfp4lm::jinja
