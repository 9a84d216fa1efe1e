// Python str operations on UTF-8 text, for the template's string methods and filters. Stripping and
// splitting work on code points and treat as whitespace what Python's str.isspace() does. Case mapping
// (upper, lower, capitalize, title) covers ASCII, Latin-1 (with upper("ß") = "SS"), Latin Extended-A, Greek
// and Cyrillic; other scripts pass through unchanged, where Python would map some of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nvfp4lm::jinja {

std::string upper(const std::string& text);
std::string lower(const std::string& text);
std::string capitalize(const std::string& text);  // Python's str.capitalize (first upper, rest lower)
std::string title(const std::string& text);       // Python's str.title

// str.strip / lstrip / rstrip: `chars` null strips whitespace, otherwise any code point in *chars.
std::string strip(const std::string& text, const std::string* chars, bool left, bool right);

std::string replace(const std::string& text, const std::string& old, const std::string& replacement, int64_t count);

// str.split() (runs of whitespace, no empty items) and str.split(sep); max_split < 0 = no limit.
std::vector<std::string> split_whitespace(const std::string& text, int64_t max_split);
std::vector<std::string> split(const std::string& text, const std::string& separator, int64_t max_split);

// Jinja2's indent filter: every line but the first (unless `first`) gets `pad`; blank lines only if `blank`.
std::string indent(const std::string& text, const std::string& pad, bool first, bool blank);

}  // namespace nvfp4lm::jinja
