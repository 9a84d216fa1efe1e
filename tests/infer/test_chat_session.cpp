// Chat sessions on a fake model whose logits depend on the whole token history: each turn reuses the cached
// prefix (runs only the new tokens) and yet gives exactly what a fresh run of the full conversation gives;
// /reset, /system; the input parser; the REPL through streams.
#include <gtest/gtest.h>

#include <sstream>

#include "core/error.h"
#include "infer/chat_repl.h"
#include "infer/chat_session.h"
#include "infer/stop_conditions.h"
#include "infer_test_util.h"

namespace nvfp4lm::test::test_chat_session {
namespace {

constexpr int64_t kVocab = 151669;

// Greedy answers made of ordinary words, chosen by a hash of the whole history (so any mistake in what the
// cache holds changes the answer); <|im_end|> after a history-dependent number of words.
LogitsFunction word_logits() {
  const Tokenizer& tok = qwen3_tokenizer();
  std::vector<int32_t> words;
  for (const char* word : {"Ġapple", "Ġbanana", "Ġcherry", "Ġdate", "Ġfig", "Ġgrape", "Ġlemon", "Ġmango"})
    words.push_back(*tok.token_id(word));
  const int32_t im_end = *tok.token_id("<|im_end|>");
  const int32_t assistant_newline = tok.encode("assistant\n").back();
  return [words, im_end, assistant_newline](std::span<const int32_t> history, std::span<float> row) {
    uint64_t hash = 0;
    for (int32_t id : history) hash = mix64(hash ^ static_cast<uint64_t>(id));
    // Words since the last "assistant\n": end the answer after 2..5 of them.
    size_t since = 0;
    while (since < history.size() && history[history.size() - 1 - since] != assistant_newline) ++since;
    if (since >= 2 + hash % 4) {
      row[static_cast<size_t>(im_end)] = 10.0f;
    } else {
      row[static_cast<size_t>(words[hash % words.size()])] = 10.0f;
    }
  };
}

ChatSessionOptions session_options(const std::string& system = "") {
  ChatSessionOptions options;
  options.generation.max_new_tokens = 50;
  options.generation.sampling.temperature = 0;
  options.generation.eos_ids = end_of_sequence_ids(qwen3_preset("tiny"), std::nullopt, qwen3_tokenizer(), kVocab);
  options.chat_template = ChatTemplate::resolve(qwen3_tokenizer(), "qwen3-instruct-2507");
  options.system_prompt = system;
  return options;
}

// What a fresh model says to the whole conversation in one go.
GenerationResult fresh_answer(const std::vector<int32_t>& prompt) {
  FakeLm lm(kVocab, 4096, word_logits());
  Generator generator(lm, qwen3_tokenizer(), session_options().generation);
  return generator.generate(prompt);
}

TEST(ChatSession, ReusesTheCacheAndMatchesAFreshRun) {
  FakeLm lm(kVocab, 4096, word_logits());
  ChatSession session(lm, qwen3_tokenizer(), session_options("You are terse."));
  for (const std::string user : {"Name a fruit.", "Another one?", "And a third, please."}) {
    const std::vector<int32_t> prompt = session.prompt_ids(user);
    const GenerationResult expected = fresh_answer(prompt);
    const int64_t cached_before = lm.length();
    const size_t calls_before = lm.forward_sizes.size();
    const GenerationResult result = session.reply(user);
    EXPECT_EQ(result.tokens, expected.tokens) << user;
    EXPECT_EQ(result.text, expected.text) << user;
    EXPECT_EQ(result.stop_reason, StopReason::EndOfSequence) << user;
    EXPECT_FALSE(result.text.empty());
    // Everything cached was a prefix of the new conversation: only the new tokens ran in the prefill.
    EXPECT_EQ(result.stats.cached_tokens, cached_before) << user;
    EXPECT_EQ(lm.forward_sizes[calls_before], static_cast<int64_t>(prompt.size()) - cached_before) << user;
  }
  ASSERT_EQ(session.messages().size(), 7u);
  EXPECT_EQ(session.messages()[0].role, "system");
  EXPECT_EQ(session.messages()[2].role, "assistant");
}

TEST(ChatSession, ResetAndSystem) {
  FakeLm lm(kVocab, 4096, word_logits());
  ChatSession session(lm, qwen3_tokenizer(), session_options());
  const std::string first = session.reply("Hello").text;
  const std::string second = session.reply("Hello").text;  // same words, longer history
  session.reset();
  EXPECT_TRUE(session.messages().empty());
  EXPECT_EQ(session.reply("Hello").text, first);
  EXPECT_EQ(session.reply("Hello").text, second);

  session.set_system("Be nice.");
  ASSERT_EQ(session.messages().size(), 1u);
  const GenerationResult with_system = session.reply("Hello");
  FakeLm fresh(kVocab, 4096, word_logits());
  ChatSession other(fresh, qwen3_tokenizer(), session_options("Be nice."));
  EXPECT_EQ(other.reply("Hello").tokens, with_system.tokens);
  session.reset();
  ASSERT_EQ(session.messages().size(), 1u);  // the system prompt survives /reset
  EXPECT_EQ(session.messages()[0].content, "Be nice.");
}

TEST(ChatSession, ContextFullLeavesTheHistoryAlone) {
  FakeLm lm(kVocab, 40, word_logits());
  ChatSession session(lm, qwen3_tokenizer(), session_options());
  session.reply("Hi");
  const size_t messages = session.messages().size();
  EXPECT_THROW(session.reply(std::string(200, 'z') + " long"), Error);
  EXPECT_EQ(session.messages().size(), messages);
  session.reset();
  EXPECT_NO_THROW(session.reply("Hi"));
}

TEST(ChatInputParsing, CommandsAndMessages) {
  using Kind = ChatInput::Kind;
  EXPECT_EQ(parse_chat_input("hello").kind, Kind::Message);
  EXPECT_EQ(parse_chat_input("hello\r").text, "hello");
  EXPECT_EQ(parse_chat_input("   ").kind, Kind::Empty);
  EXPECT_EQ(parse_chat_input("/reset").kind, Kind::Reset);
  EXPECT_EQ(parse_chat_input("/exit").kind, Kind::Exit);
  EXPECT_EQ(parse_chat_input("/quit").kind, Kind::Exit);
  EXPECT_EQ(parse_chat_input("/help").kind, Kind::Help);
  const ChatInput system = parse_chat_input("/system You are a pirate.");
  EXPECT_EQ(system.kind, Kind::System);
  EXPECT_EQ(system.text, "You are a pirate.");
  EXPECT_EQ(parse_chat_input("/system").kind, Kind::System);
  EXPECT_EQ(parse_chat_input("/frobnicate").kind, Kind::Unknown);
  EXPECT_EQ(parse_chat_input("/reset now").kind, Kind::Unknown);
  const ChatInput slash = parse_chat_input("//etc/passwd is a file");
  EXPECT_EQ(slash.kind, Kind::Message);
  EXPECT_EQ(slash.text, "/etc/passwd is a file");
}

std::string repl(const std::string& input, std::string* err_text = nullptr, ChatReplStats* stats = nullptr) {
  FakeLm lm(kVocab, 4096, word_logits());
  ChatSession session(lm, qwen3_tokenizer(), session_options());
  std::istringstream in(input);
  std::ostringstream out, err;
  const ChatReplStats result = run_chat_repl(session, in, out, err, false);
  if (err_text) *err_text = err.str();
  if (stats) *stats = result;
  return out.str();
}

TEST(ChatRepl, TurnsCommandsAndEndOfInput) {
  const std::string one = repl("Hello\n");
  ASSERT_FALSE(one.empty());
  EXPECT_EQ(one.back(), '\n');
  EXPECT_EQ(one.find("> "), std::string::npos) << "no prompt marker under a pipe";
  std::string err;
  ChatReplStats stats;
  // /reset makes the second answer the first one again; /exit stops reading.
  EXPECT_EQ(repl("Hello\n/reset\nHello\n/exit\nHello\n", &err, &stats), one + one);
  EXPECT_EQ(stats.turns, 2);
  EXPECT_NE(err.find("[conversation reset]"), std::string::npos) << err;
  EXPECT_NE(err.find("tok/s"), std::string::npos) << err;
  // Without /reset the history changes the second answer.
  EXPECT_NE(repl("Hello\nHello\n"), one + one);
  // /system starts over with a system prompt.
  EXPECT_NE(repl("/system Be brief.\nHello\n"), one);
  EXPECT_EQ(repl("/system Be brief.\nHello\n"), repl("/system Be brief.\n\nHello\n"));
  // Unknown commands are reported, not sent.
  EXPECT_EQ(repl("/bogus\nHello\n", &err), one);
  EXPECT_NE(err.find("unknown command '/bogus'"), std::string::npos) << err;
}

}  // namespace
}  // namespace nvfp4lm::test::test_chat_session
