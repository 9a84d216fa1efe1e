// Builds the GPT-2 bytes_to_unicode() table once (static, immutable after initialisation).
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace nvfp4lm::tokenizer {
namespace {

struct Tables {
  std::array<char32_t, 256> byte_to_char{};
  std::array<int16_t, 512> char_to_byte{};  // every mapped character is < U+0200

  Tables() {
    char_to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      char32_t ch = printable(b) ? static_cast<char32_t>(b) : next++;
      byte_to_char[static_cast<size_t>(b)] = ch;
      char_to_byte[ch] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables instance;
  return instance;
}

}  // namespace

char32_t byte_to_char(unsigned char byte) { return tables().byte_to_char[byte]; }

int char_to_byte(char32_t ch) { return ch < 512 ? tables().char_to_byte[ch] : -1; }

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_char(static_cast<unsigned char>(c)));
  return out;
}

bool byte_level_to_bytes(std::string_view text, std::string& out) {
  out.clear();
  for (size_t pos = 0; pos < text.size();) {
    if (utf8_sequence_length(text, pos) == 0) return false;
    int byte = char_to_byte(decode_utf8(text, pos));
    if (byte < 0) return false;
    out.push_back(static_cast<char>(byte));
  }
  return true;
}

}  // namespace nvfp4lm::tokenizer
