// Numbers typed by a user (flags, environment variables), read strictly. CLI11 2.1 alone would take "-1" for
// an unsigned flag as 2^64-1, saturate "9223372036854775808" to INT64_MAX, read "010" as octal and "1e999" as
// infinity; every numeric flag goes through parse_number instead: decimal only, representable in T, finite,
// inside [min, max], else a message saying which of these failed.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace nvfp4lm {

template <typename T>
struct NumberRange {
  T min = std::numeric_limits<T>::lowest();
  T max = std::numeric_limits<T>::max();
};

// The value of `text`, or nullopt with `problem` set ("is not a whole number", "is out of range [1, 65536]").
template <typename T>
std::optional<T> parse_number(std::string_view text, NumberRange<T> range, std::string& problem);

// "[1, 65536]", "[0, 18446744073709551615]", "a finite number" for the unbounded reals.
template <typename T>
std::string number_range_text(NumberRange<T> range);

}  // namespace nvfp4lm
