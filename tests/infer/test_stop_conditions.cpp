// Stop strings on streamed text (held-back tails, matches across pieces) against a direct definition, and the
// end-of-sequence id set.
#include <gtest/gtest.h>

#include "core/error.h"
#include "infer/stop_conditions.h"
#include "infer_test_util.h"
#include "io/hf_config.h"

namespace nvfp4lm::test::test_stop_conditions {
namespace {

// Pushes `pieces` and returns what was shown, checking after every push that no shown text could still be
// part of a stop string and that shown text + held text is the input so far (until a stop).
std::string run_filter(StopStringFilter& filter, const std::vector<std::string>& pieces) {
  std::string shown, input;
  for (const auto& piece : pieces) {
    input += piece;
    shown += filter.push(piece);
    if (filter.stopped()) return shown;
    EXPECT_EQ(shown.size() + filter.held_bytes(), input.size());
  }
  return shown + filter.flush();
}

// The definition: everything before the earliest occurrence of any stop string.
std::string expected_output(const std::string& text, const std::vector<std::string>& stops) {
  size_t cut = text.size();
  for (const auto& stop : stops) cut = std::min(cut, text.find(stop));
  return text.substr(0, cut);
}

TEST(StopStrings, StopsBeforeTheStopStringAcrossPieces) {
  StopStringFilter filter({"STOP"});
  EXPECT_EQ(filter.push("Hello S"), "Hello ");  // "S" could start "STOP"
  EXPECT_EQ(filter.held_bytes(), 1u);
  EXPECT_EQ(filter.push("T"), "");
  EXPECT_EQ(filter.push("OP and more"), "");
  EXPECT_TRUE(filter.stopped());
  EXPECT_EQ(filter.matched(), "STOP");
  EXPECT_EQ(filter.push("ignored"), "");
  EXPECT_EQ(filter.flush(), "");
}

TEST(StopStrings, ReleasesAFalseStart) {
  StopStringFilter filter({"</answer>"});
  EXPECT_EQ(filter.push("a </ans"), "a ");
  EXPECT_EQ(filter.push("wer"), "");
  EXPECT_EQ(filter.push("x>"), "</answerx>");
  EXPECT_FALSE(filter.stopped());
  EXPECT_EQ(filter.push("</"), "");
  EXPECT_EQ(filter.flush(), "</");  // generation ended: the held tail is shown
}

TEST(StopStrings, EarliestStopWinsAndNoStopsPassesThrough) {
  StopStringFilter filter({"world", "o w"});
  EXPECT_EQ(filter.push("hello world"), "hell");
  EXPECT_EQ(filter.matched(), "o w");
  StopStringFilter none({});
  EXPECT_EQ(none.push("abc"), "abc");
  EXPECT_EQ(none.held_bytes(), 0u);
  EXPECT_THROW(StopStringFilter({""}), Error);
}

TEST(StopStrings, RandomPiecesMatchTheDefinition) {
  Rng rng(9);
  const std::string alphabet = "ab\xC3\xA9";  // 'a', 'b', 'é' (two bytes)
  auto random_text = [&](size_t chars) {
    std::string text;
    for (size_t i = 0; i < chars; ++i) {
      const uint64_t pick = rng.below(3);
      text += pick == 2 ? alphabet.substr(2) : alphabet.substr(pick, 1);
    }
    return text;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::string> stops;
    for (uint64_t n = rng.below(3); n > 0; --n) stops.push_back(random_text(1 + rng.below(4)));
    const std::string text = random_text(rng.below(30));
    // Cut at character boundaries, as the streaming decoder does.
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      size_t length = 0;
      for (uint64_t chars = 1 + rng.below(4); chars > 0 && at + length < text.size(); --chars)
        length += (static_cast<unsigned char>(text[at + length]) >= 0xC0) ? 2 : 1;
      pieces.push_back(text.substr(at, length));
      at += length;
    }
    StopStringFilter filter(stops);
    ASSERT_EQ(run_filter(filter, pieces), expected_output(text, stops)) << "text '" << text << "' trial " << trial;
  }
}

TEST(EndOfSequence, UnionOfConfigGenerationConfigAndTokenizer) {
  const Tokenizer& tok = qwen3_tokenizer();
  Qwen3Config config = qwen3_preset("tiny");
  config.eos_token_ids = {7};
  GenerationConfig generation;
  generation.eos_token_ids = {9, 7, 200000};  // an id past the vocabulary is dropped
  const auto ids = end_of_sequence_ids(config, generation, tok, config.vocab_size);
  const int32_t im_end = *tok.token_id("<|im_end|>"), endoftext = *tok.token_id("<|endoftext|>");
  std::vector<int32_t> expected = {7, 9, endoftext, im_end};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(end_of_sequence_ids(config, std::nullopt, tok, config.vocab_size).size(), 3u);
}

TEST(EndOfSequence, FindsGenerationConfigBesideAModel) {
  TempDir dir;
  EXPECT_FALSE(find_generation_config(dir.path()).has_value());
  write_file(dir / "generation_config.json", R"({"bos_token_id": 1, "eos_token_id": [2, 3]})");
  const auto found = find_generation_config(dir.path());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->eos_token_ids, (std::vector<int64_t>{2, 3}));
  write_file(dir / "model.dat", "");
  EXPECT_TRUE(find_generation_config(dir / "model.dat").has_value());  // beside a model file
}

}  // namespace
}  // namespace nvfp4lm::test::test_stop_conditions
