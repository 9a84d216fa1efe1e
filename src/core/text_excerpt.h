// Showing user input inside a one-line error message: quoted, every control character and invalid UTF-8 byte
// escaped (a raw newline from a data file would otherwise split the message, or forge a line of its own), and
// cut to about 80 characters so a 7 MB value does not become a 7 MB message. For JSON values use json_excerpt
// (core/json_text.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace nvfp4lm {

// "user\nname" -> "\"user\\nname\""; a longer text ends with `..." (N bytes)`. Escapes: \" \\ \n \r \t, \xNN for
// other control characters, DEL and bytes that are not valid UTF-8; other characters are kept.
std::string quoted_excerpt(std::string_view text, size_t max_chars = 80);

}  // namespace nvfp4lm
