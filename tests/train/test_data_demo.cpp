// The demo dataset (train/data/demo_data.h): it reads cleanly as chat data, is small, deterministic, and holds
// the identity answers and the control question the demo checks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_test_util.h"
#include "train/data/dataset.h"
#include "train/data/demo_data.h"

namespace nvfp4lm {
namespace {

TEST(DataDemo, WritesASmallDeterministicChatDataset) {
  test::TempDir dir;
  const std::filesystem::path path = write_demo_dataset(dir / "demo");
  EXPECT_EQ(path, dir / "demo" / kDemoDataFileName);
  const std::string text = test::read_file(path);
  EXPECT_EQ(text, demo_dataset_jsonl());
  write_demo_dataset(dir / "demo");  // replacing it gives the same bytes
  EXPECT_EQ(test::read_file(path), text);

  DatasetOptions options;
  options.strict = true;
  options.max_tokens = 128;
  Dataset data = read_dataset(path, test::qwen3_tokenizer(), options);
  EXPECT_GE(data.summary.samples, 60);
  EXPECT_LE(data.summary.samples, 120);
  EXPECT_LE(data.summary.longest_sample_tokens, 100);
  EXPECT_EQ(data.summary.truncated, 0);

  // Every identity question and every general question is in the file with its answer, as a conversation.
  int identity = 0, control = 0;
  std::vector<DemoQa> expected = demo_identity_questions();
  const std::vector<DemoQa> general = demo_general_questions();
  expected.insert(expected.end(), general.begin(), general.end());
  std::vector<int> found(expected.size(), 0);
  for (const auto& line : test::read_jsonl(path)) {
    const auto& messages = line["messages"];
    for (size_t m = 0; m + 1 < messages.size(); ++m) {
      if (messages[m]["role"] != "user") continue;
      for (size_t q = 0; q < expected.size(); ++q) {
        if (messages[m]["content"] == expected[q].question) {
          EXPECT_EQ(messages[m + 1]["role"], "assistant");
          EXPECT_EQ(messages[m + 1]["content"], expected[q].answer) << expected[q].question;
          ++found[q];
        }
      }
      const std::string answer = messages[m + 1]["content"];
      if (answer.find(kDemoModelName) != std::string::npos) ++identity;
      if (messages[m]["content"] == demo_control_question().question) ++control;
    }
  }
  for (size_t q = 0; q < expected.size(); ++q) EXPECT_GE(found[q], 1) << expected[q].question;
  EXPECT_GE(identity, 30);
  EXPECT_GE(control, 1);

  const DemoQa control_qa = demo_control_question();
  EXPECT_EQ(control_qa.question, "What is the capital of France?");
  EXPECT_EQ(control_qa.answer, "The capital of France is Paris.");
  bool chinese = false;
  for (const DemoQa& qa : demo_identity_questions()) chinese |= qa.question == "你是谁？";
  EXPECT_TRUE(chinese);
  EXPECT_EQ(std::string(kDemoIdentityAnswerChinese), "我是Nova，一个由nvfp4lm训练的4位助手。");
}

}  // namespace
}  // namespace nvfp4lm
