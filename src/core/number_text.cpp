#include "core/number_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "core/text_excerpt.h"

namespace nvfp4lm {
namespace {

// The text as the messages show it: 'text' as given when it is short printable ASCII (every flag value a person
// types), else quoted_excerpt's escaped and bounded form, so a newline or a megabyte never reaches a message raw.
std::string shown(std::string_view text) {
  const bool plain = text.size() <= 40 &&
                     std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '\''; });
  return plain ? fmt::format("'{}'", text) : quoted_excerpt(text, 40);
}

}  // namespace

template <typename T>
std::string number_range_text(NumberRange<T> range) {
  if constexpr (std::is_floating_point_v<T>) {
    if (range.min == std::numeric_limits<T>::lowest() && range.max == std::numeric_limits<T>::max())
      return "a finite number";
  }
  return fmt::format("in [{}, {}]", range.min, range.max);
}

template <typename T>
std::optional<T> parse_number(std::string_view text, NumberRange<T> range, std::string& problem) {
  T value{};
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (!text.empty() && text.front() == '+') ++begin;  // "+5" is as clear as "5"; from_chars refuses the sign
  std::from_chars_result result{};
  if constexpr (std::is_floating_point_v<T>) {
    result = std::from_chars(begin, end, value, std::chars_format::general);
  } else {
    if constexpr (std::is_unsigned_v<T>) {
      if (begin != end && *begin == '-') {
        problem = fmt::format("{} is negative; expected a whole number {}", shown(text), number_range_text(range));
        return std::nullopt;
      }
    }
    result = std::from_chars(begin, end, value, 10);
  }
  const bool whole = result.ec == std::errc() && result.ptr == end && begin != end;
  if (result.ec == std::errc::result_out_of_range || (whole && std::is_floating_point_v<T> && !std::isfinite(value))) {
    problem = fmt::format("{} is out of range; expected {}", shown(text), number_range_text(range));
    return std::nullopt;
  }
  if (!whole) {
    problem =
        fmt::format("{} is not {}", shown(text), std::is_floating_point_v<T> ? "a number" : "a whole decimal number");
    return std::nullopt;
  }
  if (value < range.min || value > range.max) {
    problem = fmt::format("{} is out of range; expected {}", text, number_range_text(range));
    return std::nullopt;
  }
  return value;
}

#define NVFP4LM_NUMBER_TEXT(T)                                                               \
  template std::optional<T> parse_number<T>(std::string_view, NumberRange<T>, std::string&); \
  template std::string number_range_text<T>(NumberRange<T>);
NVFP4LM_NUMBER_TEXT(int)
NVFP4LM_NUMBER_TEXT(int64_t)
NVFP4LM_NUMBER_TEXT(uint64_t)
NVFP4LM_NUMBER_TEXT(double)
NVFP4LM_NUMBER_TEXT(float)
#undef NVFP4LM_NUMBER_TEXT

}  // namespace nvfp4lm
