// Tokenizer::encode_prefix (tokenizer.h): with a budget of N tokens it gives the first N ids of encode() and says
// whether more exist, for every corpus string and budget and for long pre-tokenizer pieces of every kind (where it
// byte-pair encodes window by window); and the work it does is bounded by N, not by the text: 64 MB of NUL bytes
// (one piece) costs a few KiB of memory for 64 tokens.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <random>

#include "core/error.h"
#include "tokenizer_test_util.h"

namespace nvfp4lm::test_encode_prefix {
namespace {

using test::fixture_path;
using test::qwen3_tokenizer;
using test::read_jsonl;

// encode_prefix(text, budget) against encode(text) for the given budgets and every budget near the end.
void expect_prefixes(const Tokenizer& tokenizer, const std::string& text, std::vector<size_t> budgets,
                     bool allow_special, const std::string& name) {
  const std::vector<int32_t> full = tokenizer.encode(text, allow_special);
  for (size_t extra : {size_t{0}, size_t{1}, size_t{2}}) {
    if (full.size() >= extra) budgets.push_back(full.size() - extra);
    budgets.push_back(full.size() + extra);
  }
  for (const size_t budget : budgets) {
    std::vector<int32_t> ids = {-7};  // appended to, never replaced
    const bool more = tokenizer.encode_prefix(text, budget, ids, allow_special);
    const size_t expected = std::min(budget, full.size());
    ASSERT_EQ(ids.size(), expected + 1) << name << ", budget " << budget << " of " << full.size();
    EXPECT_EQ(ids[0], -7);
    EXPECT_TRUE(std::equal(ids.begin() + 1, ids.end(), full.begin()))
        << name << ", budget " << budget << ": not a prefix of encode()";
    EXPECT_EQ(more, full.size() > budget) << name << ", budget " << budget << " of " << full.size();
  }
}

TEST(EncodePrefix, IsAPrefixOfEncodeForEveryCorpusString) {
  const Tokenizer& tokenizer = qwen3_tokenizer();
  const auto rows = read_jsonl(fixture_path("tokenizer/corpus.jsonl"));
  ASSERT_GE(rows.size(), 300u);
  for (const auto& row : rows) {
    const std::string text = row["text"].get<std::string>();
    for (const bool allow_special : {true, false})
      expect_prefixes(tokenizer, text, {0, 1, 2, 3, 5, 8}, allow_special, "corpus " + row["id"].dump());
  }
}

// Long single pieces: the windowed byte-pair encoding must agree with encoding the piece whole.
TEST(EncodePrefix, LongPiecesGiveTheWholePiecesTokens) {
  const Tokenizer& tokenizer = qwen3_tokenizer();
  std::mt19937 random(33);
  auto random_text = [&](const std::vector<std::string>& alphabet, size_t count) {
    std::string text;
    std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
    for (size_t i = 0; i < count; ++i) text += alphabet[pick(random)];
    return text;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"NUL bytes", std::string(60000, '\0')},
      {"spaces", std::string(30000, ' ') + "x"},
      {"newlines", std::string(20000, '\n')},
      {"tabs and spaces", random_text({" ", "\t", "  ", "    "}, 20000)},
      {"one letter", std::string(40000, 'a')},
      {"two letters", random_text({"a", "b"}, 40000)},
      {"english letters", random_text({"e", "t", "a", "o", "i", "n", "th", "er", "an", "in", "Q", "z"}, 30000)},
      {"CJK", random_text({"你", "好", "世", "界", "中", "文", "的", "是"}, 15000)},
      {"punctuation", random_text({"!", "=", "-", "*", "/", "==", "->", "{", "}", "#", "."}, 30000)},
      {"dashes", std::string(30000, '-')},
      {"emoji", random_text({"😀", "👍", "🎉", "\xE2\x80\x8D"}, 10000)},
      {"combining marks", random_text({"e\xCC\x81", "a", "\xCC\x88", "o"}, 20000)},  // NFC changes these
      {"mixed", random_text({"word ", "  ", "\n", "123", "你好", "!!", "\xCC\x81", "<|im_end|>", "x"}, 8000)},
  };
  for (const auto& [name, text] : cases) expect_prefixes(tokenizer, text, {1, 7, 100, 1000, 2500, 6000}, true, name);
}

TEST(EncodePrefix, AddedTokensAndTheirNeighbours) {
  const Tokenizer& tokenizer = qwen3_tokenizer();
  const std::string text =
      "<|im_start|>user\nhi<|im_end|><|im_end|>  <think>\n\n</think>" + std::string(9000, '\0') + "<|endoftext|>";
  for (const bool allow_special : {true, false})
    expect_prefixes(tokenizer, text, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 20}, allow_special, "added tokens");
  std::vector<int32_t> ids;
  EXPECT_FALSE(tokenizer.encode_prefix("", 0, ids));
  EXPECT_TRUE(tokenizer.encode_prefix("a", 0, ids));
  EXPECT_TRUE(ids.empty());
  EXPECT_THROW(tokenizer.encode_prefix("ok \xFF", 1, ids), Error);  // the same UTF-8 check as encode()
}

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// The issue's case: calibration on 64 MB of NUL bytes took 1.59 GB for 64 tokens (the piece was merged whole).
TEST(EncodePrefix, AHugePieceCostsWhatItsTokensCost) {
  const Tokenizer& tokenizer = qwen3_tokenizer();
  const std::string text(64u << 20, '\0');
  std::vector<int32_t> ids;
  const long before = peak_rss_kib();
  EXPECT_TRUE(tokenizer.encode_prefix(text, 64, ids));
  const long grown_mib = (peak_rss_kib() - before) / 1024;
  ASSERT_EQ(ids.size(), 64u);
  std::vector<int32_t> expected = tokenizer.encode(std::string(100000, '\0'));
  expected.resize(64);
  EXPECT_EQ(ids, expected);
  EXPECT_LT(grown_mib, test::kSanitizerBuild ? 64 : 16) << "peak RSS grew by " << grown_mib << " MiB for 64 tokens";
}

}  // namespace
}  // namespace nvfp4lm::test_encode_prefix
