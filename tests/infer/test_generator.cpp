// The generation loop on a fake model with scripted logits: streamed text equals the decoded tokens, EOS and stop
// strings end it without being shown, the token budget and the context guard, padded vocabulary rows never drawn,
// the statistics it reports, and which history the penalties see.
#include <gtest/gtest.h>

#include "core/error.h"
#include "infer/generator.h"
#include "infer/stop_conditions.h"
#include "infer_test_util.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm::test::test_generator {
namespace {

constexpr int64_t kVocab = 151669;  // the Qwen3 tokenizer's ids

GenerationOptions greedy_options(int64_t max_new_tokens) {
  GenerationOptions options;
  options.max_new_tokens = max_new_tokens;
  options.sampling.temperature = 0;
  options.eos_ids = end_of_sequence_ids(qwen3_preset("tiny"), std::nullopt, qwen3_tokenizer(), kVocab);
  return options;
}

struct Streamed {
  GenerationResult result;
  std::vector<std::string> pieces;
};

Streamed generate(CachedLm& lm, const std::vector<int32_t>& prompt, const GenerationOptions& options) {
  Generator generator(lm, qwen3_tokenizer(), options);
  Streamed run;
  run.result = generator.generate(prompt, [&](std::string_view piece) { run.pieces.emplace_back(piece); });
  return run;
}

TEST(Generation, StreamsTheDecodedTextAndStopsAtEos) {
  const Tokenizer& tok = qwen3_tokenizer();
  // Emoji and CJK are split over byte tokens: the pieces must still be whole characters.
  const std::string answer = "Hi \xF0\x9F\x98\x80 \xE4\xBD\xA0\xE5\xA5\xBD, \xF0\xAA\x9A\xA5 done.";
  std::vector<int32_t> script = tok.encode(answer);
  const int32_t im_end = *tok.token_id("<|im_end|>");
  script.push_back(im_end);
  const std::vector<int32_t> prompt = tok.encode("Say hi.");
  FakeLm lm(kVocab, 256, scripted_logits(script, prompt.size(), 0));
  const Streamed run = generate(lm, prompt, greedy_options(100));

  EXPECT_EQ(run.result.text, answer);
  EXPECT_EQ(run.result.tokens, script);  // the EOS token is returned but not shown
  EXPECT_EQ(run.result.stop_reason, StopReason::EndOfSequence);
  EXPECT_EQ(run.result.stop_detail, "<|im_end|>");
  std::string joined;
  for (const auto& piece : run.pieces) {
    EXPECT_TRUE(tokenizer::is_valid_utf8(piece));
    EXPECT_FALSE(piece.empty());
    joined += piece;
  }
  EXPECT_EQ(joined, answer);
  EXPECT_GT(run.pieces.size(), 3u) << "text must be streamed, not delivered at the end";

  // One prefill call with the whole prompt, then one token per step; the EOS token is never fed.
  ASSERT_EQ(lm.forward_sizes.size(), script.size());
  EXPECT_EQ(lm.forward_sizes[0], static_cast<int64_t>(prompt.size()));
  for (size_t i = 1; i < lm.forward_sizes.size(); ++i) EXPECT_EQ(lm.forward_sizes[i], 1);
  EXPECT_EQ(lm.length(), static_cast<int64_t>(prompt.size() + script.size() - 1));

  const GenerationStats& stats = run.result.stats;
  EXPECT_EQ(stats.prompt_tokens, static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(stats.generated_tokens, static_cast<int64_t>(script.size()));
  EXPECT_EQ(stats.decode_steps, static_cast<int64_t>(script.size()) - 1);
  EXPECT_GE(stats.time_to_first_token_seconds, stats.prefill_seconds);
  EXPECT_GT(stats.peak_rss_bytes, 0u);
  const std::string line = format_generation_stats(stats, Device::cpu());
  for (const char* part : {"prompt ", "generated ", "prefill ", "decode ", "tok/s", "peak memory"})
    EXPECT_NE(line.find(part), std::string::npos) << line;
}

TEST(Generation, StopStringSpanningTokensIsNotShown) {
  const Tokenizer& tok = qwen3_tokenizer();
  const std::vector<int32_t> script = tok.encode("The answer is 42.\n\nQuestion: what next?");
  const std::vector<int32_t> prompt = tok.encode("Q");
  FakeLm lm(kVocab, 256, scripted_logits(script, prompt.size(), 0));
  GenerationOptions options = greedy_options(100);
  options.stop_strings = {"\n\nQuestion:", "never"};
  const Streamed run = generate(lm, prompt, options);
  EXPECT_EQ(run.result.text, "The answer is 42.");
  EXPECT_EQ(run.result.stop_reason, StopReason::StopString);
  EXPECT_EQ(run.result.stop_detail, "\n\nQuestion:");
  std::string joined;
  for (const auto& piece : run.pieces) joined += piece;
  EXPECT_EQ(joined, "The answer is 42.");
}

TEST(Generation, MaxNewTokens) {
  const Tokenizer& tok = qwen3_tokenizer();
  const std::vector<int32_t> script = tok.encode(" one two three four five six seven");
  const std::vector<int32_t> prompt = tok.encode("Count:");
  FakeLm lm(kVocab, 256, scripted_logits(script, prompt.size(), 0));
  const Streamed run = generate(lm, prompt, greedy_options(3));
  EXPECT_EQ(run.result.tokens, std::vector<int32_t>(script.begin(), script.begin() + 3));
  EXPECT_EQ(run.result.text, tok.decode(run.result.tokens));
  EXPECT_EQ(run.result.stop_reason, StopReason::MaxTokens);
  EXPECT_EQ(run.result.stats.decode_steps, 2);
}

TEST(Generation, ContextGuard) {
  const Tokenizer& tok = qwen3_tokenizer();
  const std::vector<int32_t> prompt = tok.encode("a b c d e f g h");  // 8 tokens
  ASSERT_EQ(prompt.size(), 8u);
  const int32_t word = *tok.token_id("Ġx");
  {
    // 12 slots: 8 for the prompt, so 4 fed back + the last one sampled = 5 tokens, not 100.
    FakeLm lm(kVocab, 12, scripted_logits({}, prompt.size(), word));
    const Streamed run = generate(lm, prompt, greedy_options(100));
    EXPECT_EQ(run.result.tokens.size(), 5u);
    EXPECT_EQ(run.result.stop_reason, StopReason::ContextFull);
    EXPECT_EQ(lm.length(), 12);
  }
  {
    FakeLm lm(kVocab, 7, scripted_logits({}, prompt.size(), word));
    try {
      generate(lm, prompt, greedy_options(10));
      ADD_FAILURE() << "a prompt longer than the context was accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("8 tokens"), std::string::npos) << message;
      EXPECT_NE(message.find("7"), std::string::npos) << message;
    }
  }
  FakeLm lm(kVocab, 64, scripted_logits({}, 0, word));
  EXPECT_THROW(generate(lm, {}, greedy_options(10)), Error);  // empty prompt
  EXPECT_THROW(generate(lm, prompt, greedy_options(0)), Error);
}

TEST(Generation, NeverDrawsPaddedVocabularyRows) {
  // A model vocabulary padded past the tokenizer (151936 vs 151669): the padding row has the largest logit.
  const Tokenizer& tok = qwen3_tokenizer();
  const int32_t word = *tok.token_id("Ġx");
  FakeLm lm(151936, 64, [word](std::span<const int32_t>, std::span<float> row) {
    row[151800] = 50.0f;
    row[static_cast<size_t>(word)] = 5.0f;
  });
  const std::vector<int32_t> prompt = tok.encode("hi");
  const Streamed greedy = generate(lm, prompt, greedy_options(4));
  EXPECT_EQ(greedy.result.tokens, std::vector<int32_t>(4, word));
  lm.truncate(0);
  GenerationOptions sampled = greedy_options(20);
  sampled.sampling = SamplingOptions{};  // temperature 0.7, top-k 20, top-p 0.8
  sampled.sampling.top_p = 1.0f;
  for (int32_t id : generate(lm, prompt, sampled).result.tokens) EXPECT_LT(id, 151669);
}

TEST(Generation, RepetitionPenaltySeesPromptAndAnswer) {
  // Logits prefer ids 1000, 1001, 1002 in that order, by small margins: with a strong penalty greedy decoding
  // must walk down the list as each id enters the history (the prompt already holds 1000).
  FakeLm lm(kVocab, 64, [](std::span<const int32_t>, std::span<float> row) {
    row[1000] = 3.0f;
    row[1001] = 2.9f;
    row[1002] = 2.8f;
    row[1003] = 2.7f;
  });
  GenerationOptions options = greedy_options(3);
  options.sampling.repetition_penalty = 2.0f;
  const Streamed run = generate(lm, {1000}, options);
  EXPECT_EQ(run.result.tokens, (std::vector<int32_t>{1001, 1002, 1003}));
}

TEST(Generation, FrequencyPenaltyCountsOnlyThisAnswer) {
  // 1000 leads 1001 by 0.5: a frequency penalty of 0.3 lets 1000 win until it occurs twice in the answer. The prompt
  // holds 1000 four times, which would make 1001 win at once if it counted; a second turn (the first answer now in
  // the cache, i.e. prompt) starts counting afresh, so it repeats the first answer.
  FakeLm lm(kVocab, 64, [](std::span<const int32_t>, std::span<float> row) {
    row[1000] = 3.0f;
    row[1001] = 2.5f;
  });
  GenerationOptions options = greedy_options(5);
  options.sampling.frequency_penalty = 0.3f;
  Generator generator(lm, qwen3_tokenizer(), options);
  const std::vector<int32_t> first = generator.generate(std::vector<int32_t>{1000, 1000, 1000, 1000}).tokens;
  // 1000: 3.0, 2.7, 2.4 | 1001: 2.5, 2.2 -> 1000 1000 1001 1000 1001
  EXPECT_EQ(first, (std::vector<int32_t>{1000, 1000, 1001, 1000, 1001}));
  EXPECT_EQ(generator.generate(std::vector<int32_t>{7}).tokens, first);
}

}  // namespace
}  // namespace nvfp4lm::test::test_generator
