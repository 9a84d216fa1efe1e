// UTF-8 helpers, the byte-level alphabet and NFC (against Python's unicodedata via nfc_cases.jsonl).
#include <gtest/gtest.h>

#include <set>

#include "tokenizer/byte_level.h"
#include "tokenizer/nfc.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace nvfp4lm::tokenizer::test_text_utils {
namespace {

TEST(Utf8, ValidatesWellFormedSequencesOnly) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii that is longer than eight bytes"));
  EXPECT_TRUE(is_valid_utf8("\xC3\xA9 \xE4\xBD\xA0 \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF \xEF\xBF\xBD"));
  EXPECT_EQ(find_invalid_utf8("ab\x80"), 2u);            // lone continuation
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(find_invalid_utf8("\xE0\x80\xAF"), 0u);      // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);     // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // > U+10FFFF
  EXPECT_EQ(find_invalid_utf8("12345678\xE4\xBD"), 8u);  // truncated after the ASCII fast path
  EXPECT_EQ(find_invalid_utf8("\xFF"), 0u);
}

TEST(Utf8, ReplacesMaximalSubpartsLikeRust) {
  // Rust's from_utf8_lossy / the Unicode recommendation: one U+FFFD per maximal invalid subpart.
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(to_valid_utf8("a\xF0\x9F\x98"
                          "b"),
            "a" + r + "b");                             // truncated 4-byte: one replacement
  EXPECT_EQ(to_valid_utf8("\xC0\xAF"), r + r);          // invalid lead bytes: one each
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), r + r + r);  // surrogate: ED then two continuations
  EXPECT_EQ(to_valid_utf8("\xE4\xBD"), r);
  EXPECT_EQ(to_valid_utf8("ok \xE4\xBD\xA0"), "ok \xE4\xBD\xA0");
}

TEST(Utf8, IncompleteSuffixIsOnlyAStartedValidSequence) {
  EXPECT_EQ(incomplete_utf8_suffix("abc"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xE4"), 1u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xE4\xBD"), 2u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xE4\xBD\xA0"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_suffix("\xE0\x80"), 0u);  // can never complete
  EXPECT_EQ(incomplete_utf8_suffix("\x80"), 0u);
}

TEST(ByteLevel, IsTheGpt2Alphabet) {
  EXPECT_EQ(byte_to_char(' '), U'\u0120');
  EXPECT_EQ(byte_to_char('\n'), U'\u010A');
  EXPECT_EQ(byte_to_char('A'), U'A');
  EXPECT_EQ(byte_to_char(0xAD), U'\u0143');  // soft hyphen byte is remapped
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    char32_t c = byte_to_char(static_cast<unsigned char>(b));
    EXPECT_TRUE(seen.insert(c).second);
    EXPECT_EQ(char_to_byte(c), b);
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  ASSERT_TRUE(byte_level_to_bytes(bytes_to_byte_level(all), back));
  EXPECT_EQ(back, all);
  EXPECT_FALSE(byte_level_to_bytes("\xE4\xBD\xA0", back));  // 你 is not in the alphabet
}

TEST(Nfc, KnownCases) {
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");                                 // e + acute -> é
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                              // Angstrom sign -> Å
  EXPECT_EQ(nfc("a\xCC\x81\xCC\xA3"), "\xE1\xBA\xA1\xCC\x81");             // reorder: dot below first, then compose
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // Hangul L V T -> 각
  EXPECT_EQ(nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");              // QA is a composition exclusion
  EXPECT_EQ(nfc("plain"), "plain");
  EXPECT_TRUE(is_nfc_quick("ascii and 中文 and 😀"));
  EXPECT_FALSE(is_nfc_quick("e\xCC\x81"));
}

TEST(Nfc, MatchesPythonUnicodedata) {
  auto rows = test::read_jsonl(test::fixture_path("tokenizer/nfc_cases.jsonl"));
  ASSERT_GT(rows.size(), 5000u);
  size_t failures = 0;
  for (const auto& row : rows) {
    std::string input = row[0].get<std::string>(), want = row[1].get<std::string>();
    std::string got = nfc(input);
    if (got != want && ++failures <= 20) {
      ADD_FAILURE() << "nfc(" << nlohmann::json(input).dump() << ") = " << nlohmann::json(got).dump() << ", want "
                    << nlohmann::json(want).dump();
    }
    // The quick check never claims NFC for text that is not.
    if (is_nfc_quick(input)) {
      EXPECT_EQ(input, want) << nlohmann::json(input).dump();
    }
  }
  EXPECT_EQ(failures, 0u) << "Unicode " << nfc_unicode_version();
}

}  // namespace
}  // namespace nvfp4lm::tokenizer::test_text_utils
