// `nvfp4lm tokenize` end to end, through the real executable.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace nvfp4lm::test_cli_tokenize {
namespace {

std::string bundled() { return "--tokenizer '" + bundled_qwen3_tokenizer_dir().string() + "'"; }

TEST(CliTokenize, PrintsIdsAsJson) {
  test::CliResult r = test::run_cli("tokenize " + bundled(), "Hello world");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[9707,1879]\n");
}

TEST(CliTokenize, TokensChatAndNoSpecial) {
  test::CliResult tokens = test::run_cli("tokenize --tokens " + bundled(), "Hello world");
  ASSERT_EQ(tokens.exit_code, 0) << tokens.err;
  EXPECT_EQ(tokens.out, "[\"Hello\",\"Ġworld\"]\n");

  test::CliResult chat = test::run_cli("tokenize --chat " + bundled(), "Hi");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  const Tokenizer& tok = test::qwen3_tokenizer();
  auto want = tok.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(nlohmann::json::parse(chat.out).get<std::vector<int32_t>>(), want);

  test::CliResult special = test::run_cli("tokenize " + bundled(), "<|im_end|>");
  test::CliResult text = test::run_cli("tokenize --no-special " + bundled(), "<|im_end|>");
  EXPECT_EQ(special.out, "[151645]\n");
  EXPECT_EQ(nlohmann::json::parse(text.out).get<std::vector<int32_t>>(), tok.encode("<|im_end|>", false));
}

TEST(CliTokenize, ModelDirectoryAndErrors) {
  test::TempDir dir;
  test::CliResult missing = test::run_cli("tokenize --model '" + dir.path().string() + "'", "x");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no tokenizer.json"), std::string::npos) << missing.err;
  test::CliResult none = test::run_cli("tokenize", "x");
  EXPECT_EQ(none.exit_code, 2);  // a usage error: neither --model nor --tokenizer
  EXPECT_NE(none.err.find("--tokenizer"), std::string::npos) << none.err;
  test::CliResult bad = test::run_cli("tokenize " + bundled(), "bad \xFF byte");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("not valid UTF-8 at byte 4"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace nvfp4lm::test_cli_tokenize
