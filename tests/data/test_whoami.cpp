// The identity data set (data/whoami_data.h): it reads cleanly as chat data, is deterministic for its options
// and different for another seed, has the asked share of identity conversations in both languages with the
// answer that names the model, uses every phrasing once before repeating one, and holds each control question with
// its ordinary answer.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/test_util.h"
#include "data/dataset.h"
#include "data/whoami_data.h"
#include "tokenizer/tokenizer_test_util.h"

namespace nvfp4lm::test_whoami {
namespace {

struct Counted {
  int64_t identity = 0, english = 0, chinese = 0, control = 0, lines = 0;
  std::map<std::string, int> identity_questions;
  std::set<std::string> control_questions;
};

Counted count(const std::string& jsonl, const WhoamiOptions& options) {
  std::map<std::string, std::string> control_answer;
  for (const WhoamiQa& qa : whoami_control_questions()) control_answer[qa.question] = qa.answer;
  Counted counted;
  size_t start = 0;
  while (start < jsonl.size()) {
    const size_t end = jsonl.find('\n', start);
    const nlohmann::json line = nlohmann::json::parse(jsonl.substr(start, end - start));
    start = end + 1;
    ++counted.lines;
    const nlohmann::json& messages = line.at("messages");
    const std::string question = messages[messages.size() - 2].at("content");
    const std::string answer = messages.back().at("content");
    EXPECT_EQ(messages.back().at("role"), "assistant");
    if (answer == whoami_answer_english(options) || answer == whoami_answer_chinese(options)) {
      ++counted.identity;
      ++(answer == whoami_answer_english(options) ? counted.english : counted.chinese);
      ++counted.identity_questions[question];
    } else {
      ++counted.control;
      EXPECT_TRUE(control_answer.count(question)) << question;
      EXPECT_EQ(answer, control_answer[question]);
      counted.control_questions.insert(question);
    }
  }
  return counted;
}

TEST(DataWhoami, ABalancedDeterministicChatDataSetForAnyName) {
  WhoamiOptions options;
  options.name = "Ada";
  options.creator = "the lab";
  options.conversations = 400;
  options.identity_share = 0.6;
  const WhoamiDataset data = make_whoami_dataset(options);
  EXPECT_EQ(make_whoami_dataset(options).jsonl, data.jsonl);
  WhoamiOptions reseeded = options;
  reseeded.seed = 1;
  EXPECT_NE(make_whoami_dataset(reseeded).jsonl, data.jsonl);
  EXPECT_EQ(whoami_answer_english(options), "I am Ada, a 4-bit assistant trained by the lab.");
  EXPECT_EQ(whoami_answer_chinese(options), "我是Ada，一个由the lab训练的4位助手。");

  const Counted counted = count(data.jsonl, options);
  EXPECT_EQ(counted.lines, 400);
  EXPECT_EQ(counted.identity, 240);
  EXPECT_EQ(data.identity_conversations, 240);
  EXPECT_EQ(counted.control, 160);
  EXPECT_NEAR(static_cast<double>(counted.english), static_cast<double>(counted.chinese), 2.0);
  EXPECT_GT(data.multi_turn, 20);
  // Hundreds of phrasings, none repeated before all were used; the core questions are among them.
  EXPECT_GT(whoami_identity_questions(options).size(), 800u);
  EXPECT_EQ(counted.identity_questions.size(), 240u);
  for (const char* core : {"Who are you?", "你是谁？", "What is your name?", "你是誰？"})
    EXPECT_EQ(counted.identity_questions.count(core), 1u) << core;
  // Every control question at least once, with its answer; the demo's check among them.
  EXPECT_EQ(counted.control_questions.size(), whoami_control_questions().size());
  EXPECT_EQ(whoami_control_questions().front().question, "What is the capital of France?");

  // Any prefix is balanced too (the kinds are interleaved).
  size_t twenty_lines = 0;
  for (int i = 0; i < 20; ++i) twenty_lines = data.jsonl.find('\n', twenty_lines) + 1;
  const Counted prefix = count(data.jsonl.substr(0, twenty_lines), options);
  EXPECT_EQ(prefix.identity, 12);
  EXPECT_EQ(prefix.control, 8);

  // It is chat data the training pipeline reads without a complaint.
  test::TempDir dir;
  const std::filesystem::path path = dir / "whoami.jsonl";
  test::write_file(path, data.jsonl);
  DatasetOptions read;
  read.strict = true;
  read.max_tokens = 128;
  const Dataset dataset = read_dataset(path, test::qwen3_tokenizer(), read);
  EXPECT_EQ(dataset.summary.records, 400);
  // The bundled tokenizer's (hybrid Qwen3) template renders an earlier answer without the empty think block it gets
  // as the last turn, so each earlier answer of a multi-turn conversation is a sample of its own (tokenizer/chat.h).
  int64_t earlier_answers = 0;
  std::istringstream lines(data.jsonl);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line);
    int64_t answers = 0;
    for (const auto& message : record["messages"]) answers += message["role"] == "assistant";
    earlier_answers += answers - 1;
  }
  EXPECT_EQ(dataset.summary.samples, 400 + earlier_answers);
  EXPECT_EQ(dataset.summary.split_conversations > 0, earlier_answers > 0);
  EXPECT_EQ(dataset.summary.truncated, 0);
}

TEST(DataWhoami, BadOptionsAreErrorsNamingTheOption) {
  WhoamiOptions options;
  options.name = "";
  test::expect_error([&] { make_whoami_dataset(options); }, {"--name"});
  options = {};
  options.identity_share = 1.5;
  test::expect_error([&] { make_whoami_dataset(options); }, {"--identity-share", "1.5"});
  options = {};
  options.conversations = 1;
  test::expect_error([&] { make_whoami_dataset(options); }, {"--count", "1"});
  options.conversations = kMaxWhoamiConversations + 1;  // issue 33: 2^24 took 4.5 GB and 7 minutes
  test::expect_error([&] { make_whoami_dataset(options); }, {"--count", "2 to 1048576", "1048577"});
}

}  // namespace
}  // namespace nvfp4lm::test_whoami
