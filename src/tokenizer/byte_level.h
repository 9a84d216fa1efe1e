// GPT-2 "byte-level" alphabet: every byte 0..255 is shown as one printable Unicode character, so that
// vocab.json / tokenizer.json can store arbitrary byte strings as text. Printable Latin-1 bytes map to
// themselves; the other 68 bytes map to U+0100.. in byte order (space 0x20 -> 'Ġ' U+0120, '\n' -> 'Ċ').
// The tokenizer works on raw bytes internally; this mapping is only used to read the vocab and merges and
// to print token strings as HF does.
#pragma once

#include <string>
#include <string_view>

namespace nvfp4lm::tokenizer {

// The character that stands for `byte`.
char32_t byte_to_char(unsigned char byte);

// The byte a character stands for, or -1 when the character is not in the alphabet.
int char_to_byte(char32_t ch);

// Raw bytes -> their UTF-8 encoded byte-level string ("hello world" -> "helloĠworld").
std::string bytes_to_byte_level(std::string_view bytes);

// Byte-level string -> raw bytes. Returns false (out unspecified) when `text` is not valid UTF-8 or has a
// character outside the alphabet.
bool byte_level_to_bytes(std::string_view text, std::string& out);

}  // namespace nvfp4lm::tokenizer
