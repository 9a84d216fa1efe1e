// See text.h.
#include "tokenizer/jinja/text.h"

#include <algorithm>

#include "tokenizer/jinja/value.h"

namespace nvfp4lm::jinja {
namespace {

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char to_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }
char to_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

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
  std::string out = text;
  std::transform(out.begin(), out.end(), out.begin(), to_upper);
  return out;
}

std::string lower(const std::string& text) {
  std::string out = text;
  std::transform(out.begin(), out.end(), out.begin(), to_lower);
  return out;
}

std::string capitalize(const std::string& text) {
  std::string out = lower(text);
  if (!out.empty()) out[0] = to_upper(out[0]);
  return out;
}

std::string title(const std::string& text) {
  std::string out = text;
  bool previous_cased = false;
  for (char& c : out) {
    if (is_ascii_letter(c)) {
      c = previous_cased ? to_lower(c) : to_upper(c);
      previous_cased = true;
    } else {
      previous_cased = (static_cast<unsigned char>(c) & 0x80) != 0 && previous_cased;
    }
  }
  return out;
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
