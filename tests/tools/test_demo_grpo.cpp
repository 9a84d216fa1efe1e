// `nvfp4lm demo --grpo` (README "GRPO"): GRPO teaches the demo's random model the rule "the answer begins with a
// capital letter" on the CPU; the command passes only when the held-out reward went from under 0.2 to over 0.9, and
// the `nvfp4lm train` command it prints makes the same run (checked here over its first 6 steps: the same rewards and
// losses, bit for bit).
#include <gtest/gtest.h>

#include <regex>

#include "common/test_util.h"
#include "tools/demo_grpo.h"

namespace nvfp4lm::test_demo_grpo {
namespace {

TEST(DemoGrpo, TheHeldOutRewardRisesAndThePrintedTrainCommandMakesTheSameRun) {
  test::TempDir dir;
  const fs::path work = dir / "demo";
  const test::CliResult result = test::run_cli("demo --grpo --work-dir " + test::quoted(work));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(
      result.err, match,
      std::regex(R"(demo --grpo passed in .*: the held-out reward went from ([0-9.]+) to ([0-9.]+))")))
      << result.err;
  EXPECT_LT(std::stod(match[1]), 0.2);
  EXPECT_GT(std::stod(match[2]), 0.9);
  EXPECT_NE(result.err.find("held-out prompts before training: mean reward"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("compute path"), std::string::npos) << result.err;

  const std::vector<nlohmann::json> demo = test::read_jsonl(work / "run" / "metrics.jsonl");
  ASSERT_EQ(demo.size(), 20u);
  EXPECT_LT(demo.front()["reward"].get<double>(), 0.5);
  EXPECT_GT(demo.back()["reward"].get<double>(), 0.9);
  EXPECT_GT(demo.back()["eval_reward"].get<double>(), 0.9);

  // The printed command, run for its first 6 steps.
  ASSERT_TRUE(std::regex_search(result.err, match, std::regex("\n  nvfp4lm (train [^\n]*)"))) << result.err;
  std::string command = match[1];
  const size_t steps = command.find("--max-steps 20");
  ASSERT_NE(steps, std::string::npos) << command;
  command.replace(steps, 14, "--max-steps 6");  // past the warmup of 5
  const test::CliResult again = test::run_cli(command);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const std::vector<nlohmann::json> rerun = test::read_jsonl(work / "run-again" / "metrics.jsonl");
  ASSERT_EQ(rerun.size(), 6u);
  for (size_t i = 0; i < rerun.size(); ++i)
    for (const char* key : {"loss", "reward", "reward_std", "completions/mean_length"})
      EXPECT_EQ(rerun[i][key], demo[i][key]) << key << " at step " << i + 1;
}

TEST(DemoGrpo, GrpoAndLoraAreTwoDemos) {
  test::TempDir dir;
  const test::CliResult result = test::run_cli("demo --grpo --lora 4 --work-dir " + test::quoted(dir / "demo"));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("--grpo and --lora are two demos; choose one"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir / "demo"));
}

TEST(DemoGrpo, PromptsCarryTheirAnswers) {
  const std::vector<std::string> lines = [] {
    std::vector<std::string> out;
    std::istringstream in(grpo_demo_prompts(12, 0));
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }();
  ASSERT_EQ(lines.size(), 12u);
  for (const std::string& line : lines) {
    const nlohmann::json record = nlohmann::json::parse(line);
    std::smatch match;
    const std::string prompt = record["prompt"];
    ASSERT_TRUE(std::regex_match(prompt, match, std::regex(R"(What is ([0-9]+) plus ([0-9]+)\?)"))) << prompt;
    EXPECT_EQ(record["answer"].get<int>(), std::stoi(match[1]) + std::stoi(match[2])) << prompt;
  }
}

}  // namespace
}  // namespace nvfp4lm::test_demo_grpo
