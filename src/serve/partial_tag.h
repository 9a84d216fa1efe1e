// What the streaming parsers of an answer (serve/reasoning_parser.h, serve/tool_call_parser.h) share: how much of
// the text seen so far may still become a tag, so that they hold it back until the next piece decides.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace nvfp4lm::serve {

// The length of the longest suffix of `text` that is a proper prefix of `tag` (0 when none is).
inline size_t partial_tag(std::string_view text, std::string_view tag) {
  for (size_t length = std::min(text.size(), tag.size() - 1); length > 0; --length)
    if (text.substr(text.size() - length) == tag.substr(0, length)) return length;
  return 0;
}

}  // namespace nvfp4lm::serve
