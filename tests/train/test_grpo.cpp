// GRPO's pieces between sampling and the loss (train/grpo.h): the built-in rewards (exact answers as GSM8K and
// \boxed{} write them, regex, JSON), a reward command (its JSON lines in, its numbers out, and each way it can fail),
// TRL's group-normalized advantages against a float64 statement of its formula, the training rows' alignment, and
// the rollout seeds; the prompt reader (data/prompt_data.h).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "common/test_util.h"
#include "core/error.h"
#include "data/prompt_data.h"
#include "ops/cross_entropy.h"
#include "tokenizer/tokenizer.h"
#include "train/grpo.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_grpo {
namespace {

std::vector<double> score(const RewardSpec& spec, const std::vector<std::string>& texts,
                          const nlohmann::json& record = nlohmann::json::object()) {
  std::vector<Completion> completions;
  for (const std::string& text : texts) completions.push_back({{1}, text, true, std::nullopt});
  std::vector<const Completion*> pointers;
  std::vector<const nlohmann::json*> records;
  for (const Completion& c : completions) {
    pointers.push_back(&c);
    records.push_back(&record);
  }
  return score_completions(spec, records, pointers);
}

TEST(GrpoRewards, ExactFindsTheFinalAnswerAsDataSetsWriteIt) {
  EXPECT_EQ(extract_final_answer("3 + 4 makes 7.\n#### 7"), "7");
  EXPECT_EQ(extract_final_answer("so the answer is \\boxed{\\frac{1}{2}} here"), "\\frac{1}{2}");
  EXPECT_EQ(extract_final_answer("first 12, then 1,234.5 apples"), "1,234.5");
  EXPECT_EQ(extract_final_answer("no number"), "");
  const RewardSpec exact = parse_reward_spec("exact");
  EXPECT_EQ(score(exact, {"It is 1,234.", "#### 1234.0", "12", "\\boxed{1234}", "1234 or 12"},
                  nlohmann::json{{"answer", 1234}}),
            (std::vector<double>{1, 1, 0, 1, 0}));
  EXPECT_EQ(score(exact, {"#### Paris", "#### paris"}, nlohmann::json{{"answer", " Paris "}}),
            (std::vector<double>{1, 0}));
  EXPECT_THROW(score(exact, {"7"}, nlohmann::json{{"question", "no answer"}}), Error);
}

TEST(GrpoRewards, RegexAndJsonAndTheirSpellings) {
  EXPECT_EQ(score(parse_reward_spec("regex:^[0-9]"), {"7 apples", "apples 7", ""}), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(score(parse_reward_spec("json"), {R"({"a": [1, 2]})", "{\"a\": ", "42", "yes"}),
            (std::vector<double>{1, 0, 1, 0}));
  EXPECT_EQ(reward_spec_text(parse_reward_spec("regex:a+b")), "regex:a+b");
  for (const char* bad : {"", "regex:", "regex:(", "command:", "bleu", "Exact"})
    EXPECT_THROW(parse_reward_spec(bad), Error) << bad;
}

TEST(GrpoRewards, ACommandReadsJsonLinesAndAnswersOneNumberALine) {
  // The prompt's fields and "completion", one object a line; the command's rule here: 1 when the completion starts
  // with a digit, the regex above.
  RewardSpec spec = parse_reward_spec(R"(command:awk '{print ($0 ~ /"completion":"[0-9]/) ? 1 : 0.5}')");
  EXPECT_EQ(score(spec, {"7 apples", "apples", "9"}, nlohmann::json{{"answer", 7}}), (std::vector<double>{1, 0.5, 1}));
  // Each way it can fail names the command and what was wrong.
  struct Case {
    std::string command, expected;
  } cases[] = {{"command:echo 1", "printed 1 lines for 3"},
               {"command:printf '1\\n2\\nx\\n'", "line 3 of its output is \"x\""},
               {"command:printf '1\\n2\\n3\\n4\\n'", "more lines"},
               {"command:cat > /dev/null; exit 3", "exit status 3"},
               {"command:sleep 5", "took more than"}};
  for (const Case& c : cases) {
    RewardSpec failing = parse_reward_spec(c.command);
    failing.timeout_seconds = 0.5;
    const auto start = std::chrono::steady_clock::now();
    try {
      score(failing, {"a", "b", "c"});
      ADD_FAILURE() << c.command << " gave rewards";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << c.command << ": " << e.what();
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 3.0) << c.command;
  }
}

TEST(GrpoAdvantages, AreTrlsGroupNormalizedRewards) {
  const std::vector<double> rewards = {1, 0, 0, 1, 0.5, 0.5, 0.5, 0.5, 0, 0, 0, 1};
  const std::vector<float> got = group_advantages(rewards, 4);
  for (size_t g = 0; g < 3; ++g) {
    double mean = 0, var = 0;
    for (size_t k = 0; k < 4; ++k) mean += rewards[4 * g + k] / 4;
    for (size_t k = 0; k < 4; ++k) var += std::pow(rewards[4 * g + k] - mean, 2) / 3;  // torch.std: unbiased
    for (size_t k = 0; k < 4; ++k)
      EXPECT_NEAR(got[4 * g + k], (rewards[4 * g + k] - mean) / (std::sqrt(var) + 1e-4), 1e-6) << g << " " << k;
  }
  EXPECT_EQ(got[4], 0.0f);  // a group of equal rewards teaches nothing
}

std::vector<int32_t> ints(const Tensor& t) { return {t.data<int32_t>(), t.data<int32_t>() + t.numel()}; }

TEST(GrpoBatch, RowsArePromptThenCompletionWithTheCompletionScored) {
  const std::vector<int32_t> prompt_a = {5, 6, 7}, prompt_b = {8};
  const Completion a{{10, 11}, "x", true, std::nullopt}, b{{12, 13, 14, 15}, "y", false, std::nullopt};
  const TrainBatch batch = completion_batch({&prompt_a, &prompt_b}, {&a, &b}, {0.5f, -1.0f}, 0);
  ASSERT_EQ(batch.ids.shape(), (Shape{2, 5}));
  EXPECT_EQ(ints(batch.ids), (std::vector<int32_t>{5, 6, 7, 10, 11, 8, 12, 13, 14, 15}));
  const int32_t n = kIgnoreIndex;
  EXPECT_EQ(ints(batch.targets), (std::vector<int32_t>{n, n, 10, 11, n, 12, 13, 14, 15, n}));
  EXPECT_EQ(batch.advantages, (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(count_loss_tokens(batch), 6);
}

TEST(GrpoRollouts, SeedsDifferByStepAndCompletionAndRepeat) {
  EXPECT_EQ(rollout_seed(5, 3, 7), rollout_seed(5, 3, 7));
  EXPECT_NE(rollout_seed(5, 3, 7), rollout_seed(5, 3, 8));
  EXPECT_NE(rollout_seed(5, 3, 7), rollout_seed(5, 4, 7));
  EXPECT_NE(rollout_seed(5, 3, 7), rollout_seed(6, 3, 7));
}

TEST(PromptData, PromptsAreRenderedForGenerationAndKeepTheirRecords) {
  const Tokenizer tokenizer = Tokenizer::load(test::tiny_tokenizer_dir());
  DatasetOptions options;
  options.max_tokens = 40;
  const std::string content = R"({"prompt": "What is 2 plus 3?", "answer": 5})"
                              "\n\n"
                              R"({"messages": [{"role": "user", "content": "Hi"}], "id": "x"})"
                              "\n" +
                              std::string(R"({"prompt": ")") + std::string(300, 'z') + "\"}\n";
  const PromptData data = parse_prompt_data(content, "p.jsonl", tokenizer, options);
  ASSERT_EQ(data.samples.size(), 2u);
  EXPECT_EQ(data.summary.skipped_no_trained_tokens, 1);
  EXPECT_EQ(data.records[0]["answer"], 5);
  EXPECT_EQ(data.records[1]["id"], "x");
  EXPECT_EQ(data.samples[1].source_line, 3);
  const std::string text = tokenizer.decode(data.samples[0].ids);
  EXPECT_NE(text.find("What is 2 plus 3?"), std::string::npos) << text;
  EXPECT_EQ(text.substr(text.size() - 10), "assistant\n") << text;  // the generation prompt
  options.strict = true;
  EXPECT_THROW(parse_prompt_data(content, "p.jsonl", tokenizer, options), Error);
  for (const char* bad : {R"({"answer": 5})", R"({"prompt": ""})", R"({"prompt": "a", "messages": []})", "[1]"}) {
    try {
      parse_prompt_data(std::string(R"({"prompt": "ok"})") + "\n" + bad + "\n", "p.jsonl", tokenizer, {});
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("p.jsonl"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace nvfp4lm::test_grpo
