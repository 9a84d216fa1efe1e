// quoted_excerpt (core/text_excerpt.h): user input in an error message stays on one line, readable and short.
#include <gtest/gtest.h>

#include "core/text_excerpt.h"

namespace nvfp4lm::test_text_excerpt {
namespace {

TEST(QuotedExcerpt, EscapesControlCharactersQuotesAndInvalidUtf8) {
  EXPECT_EQ(quoted_excerpt("user"), "\"user\"");
  EXPECT_EQ(quoted_excerpt("a\nb\r\tc"), "\"a\\nb\\r\\tc\"");
  EXPECT_EQ(quoted_excerpt("say \"hi\" \\ bye"), "\"say \\\"hi\\\" \\\\ bye\"");
  EXPECT_EQ(quoted_excerpt(std::string("\x01\x7F\0z", 4)), "\"\\x01\\x7F\\x00z\"");
  EXPECT_EQ(quoted_excerpt("caf\xC3\xA9 \xE4\xB8\x96 \xF0\x9F\x98\x80"),
            "\"caf\xC3\xA9 \xE4\xB8\x96 \xF0\x9F\x98\x80\"");
  EXPECT_EQ(quoted_excerpt("bad \xFF\xC3("), "\"bad \\xFF\\xC3(\"");
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte += static_cast<char>(b);
  const std::string shown = quoted_excerpt(every_byte, 1000);
  for (const char c : shown) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7F) << shown;
}

TEST(QuotedExcerpt, CutsLongTextAtACharacterAndSaysHowLong) {
  EXPECT_EQ(quoted_excerpt(std::string(1000, 'a')), "\"" + std::string(80, 'a') + "\"... (1000 bytes)");
  EXPECT_EQ(quoted_excerpt(std::string(80, 'a')), "\"" + std::string(80, 'a') + "\"");
  std::string cjk;
  for (int i = 0; i < 5; ++i) cjk += "\xE4\xB8\x96";
  EXPECT_EQ(quoted_excerpt(cjk, 2), "\"\xE4\xB8\x96\xE4\xB8\x96\"... (15 bytes)");
}

}  // namespace
}  // namespace nvfp4lm::test_text_excerpt
