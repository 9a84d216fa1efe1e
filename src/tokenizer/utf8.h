// UTF-8 helpers for the tokenizer: validation, decoding to code points, encoding, and the lossy
// conversion that HF's decoders use (Rust String::from_utf8_lossy: each maximal invalid subpart of a
// byte sequence becomes one U+FFFD, as the Unicode standard recommends).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nvfp4lm::tokenizer {

// Length of the well-formed UTF-8 sequence starting at text[pos], or 0 when the bytes there are not
// one (bad lead byte, bad continuation, overlong, surrogate, > U+10FFFF, or truncated).
size_t utf8_sequence_length(std::string_view text, size_t pos);

// Position of the first non-ASCII byte at or after `pos` (text.size() when none): ASCII is skipped 8 bytes at a
// time, the fast path of every scan over mostly-ASCII text.
size_t skip_ascii(std::string_view text, size_t pos);

// Byte offset of the first byte that is not part of well-formed UTF-8, or text.size() when valid.
size_t find_invalid_utf8(std::string_view text);
inline bool is_valid_utf8(std::string_view text) { return find_invalid_utf8(text) == text.size(); }

// Replaces every maximal invalid subpart with U+FFFD (EF BF BD); valid text is returned unchanged.
std::string to_valid_utf8(std::string_view text);

// Decodes the well-formed sequence at text[pos] (caller guarantees validity); advances pos.
char32_t decode_utf8(std::string_view text, size_t& pos);

// Appends the UTF-8 encoding of a code point (<= U+10FFFF, not a surrogate).
void append_utf8(std::string& out, char32_t cp);

// Number of bytes at the end of `text` that form the start of a well-formed sequence that is not yet
// complete (0..3): what a streaming decoder must hold back until more bytes arrive.
size_t incomplete_utf8_suffix(std::string_view text);

}  // namespace nvfp4lm::tokenizer
