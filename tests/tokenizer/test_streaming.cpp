// StreamingDecoder on tokens that split UTF-8 characters.
#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace nvfp4lm::test_streaming {
namespace {

using test::qwen3_tokenizer;

TEST(StreamingDecoder, HoldsPartialCharacters) {
  const Tokenizer& tok = qwen3_tokenizer();
  // Rare characters are split over byte-level tokens that end mid-character.
  std::string text;
  for (const char* rare : {"\xF0\xAA\x9A\xA5", "\xF0\xA0\x80\x80", "\xF0\x9D\x90\x80", "\xE2\xBF\x95"}) text += rare;
  text += "x";
  std::vector<int32_t> ids = tok.encode(text);
  bool saw_partial = false;
  StreamingDecoder stream(tok);
  std::string out;
  for (int32_t id : ids) {
    std::string piece = stream.push(id);
    EXPECT_TRUE(tokenizer::is_valid_utf8(piece));
    if (stream.pending_bytes() > 0) saw_partial = true;
    out += piece;
  }
  out += stream.finish();
  EXPECT_EQ(out, text);
  EXPECT_TRUE(saw_partial) << "expected a rare character to be split over byte tokens";
}

TEST(StreamingDecoder, ByteTokensOneAtATime) {
  const Tokenizer& tok = qwen3_tokenizer();
  // Feed 你 (E4 BD A0) as three single-byte tokens: nothing until the last byte.
  std::vector<int32_t> bytes;
  for (unsigned char b : std::string("\xE4\xBD\xA0")) {
    bytes.push_back(*tok.token_id(tokenizer::bytes_to_byte_level(std::string(1, static_cast<char>(b)))));
  }
  StreamingDecoder stream(tok);
  EXPECT_EQ(stream.push(bytes[0]), "");
  EXPECT_EQ(stream.push(bytes[1]), "");
  EXPECT_EQ(stream.pending_bytes(), 2u);
  EXPECT_EQ(stream.push(bytes[2]), "\xE4\xBD\xA0");
  // An unfinished character at the end becomes U+FFFD, as in decode().
  EXPECT_EQ(stream.push(bytes[0]), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.pending_bytes(), 0u);
  // A byte that can never start a character is replaced at once.
  EXPECT_EQ(stream.push(bytes[1]), "\xEF\xBF\xBD");
}

TEST(StreamingDecoder, SkipsSpecialTokens) {
  const Tokenizer& tok = qwen3_tokenizer();
  std::vector<int32_t> ids = tok.encode("Hi<|im_end|>");
  StreamingDecoder stream(tok, /*skip_special=*/true);
  std::string out;
  for (int32_t id : ids) out += stream.push(id);
  EXPECT_EQ(out + stream.finish(), "Hi");
}

}  // namespace
}  // namespace nvfp4lm::test_streaming
