// The acceptance test of the whole pipeline: `nvfp4lm demo --work-dir DIR` (synthesise a tiny Qwen3 with the real
// tokenizer, NVFP4 QAT w4a16 training on the CPU, ModelOpt NVFP4 export, reload, greedy answers) through the real
// executable. It must exit 0, its training must end with a cross-entropy below 0.3 nats per trained token (a run on
// 2 cores ends near 0.05, and starts near 12 = ln(151936)), and the reloaded export must give the three trained
// answers: the identity answer in English and in Chinese and the unchanged control answer. About 100 s on 2 cores.
// The LoRA demo's test (`nvfp4lm demo --lora 16`) is tests/tools/slow_demo_lora.cpp (label slow).
#include <gtest/gtest.h>

#include <iostream>

#include "common/test_util.h"
#include "tools/demo.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_demo_learns {
namespace {

constexpr double kFinalLossBound = 0.3;

TEST(DemoLearns, TrainsExportsAndAnswersWithTheTrainedAnswers) {
  test::TempDir dir;
  const fs::path work = dir / "demo";
  const test::CliResult result = test::run_cli("demo --work-dir '" + work.string() + "'");
  ASSERT_EQ(result.exit_code, 0) << result.err;

  const std::vector<nlohmann::json> metrics = test::read_jsonl(work / "run" / "metrics.jsonl");
  ASSERT_GT(metrics.size(), 10u);
  const double first = metrics.front()["loss"].get<double>(), last = metrics.back()["loss"].get<double>();
  EXPECT_GT(first, 5.0) << "a random model starts near ln(vocab)";
  EXPECT_LT(last, kFinalLossBound) << "final CE loss " << last << " (first " << first << ")";
  std::cout << "demo: CE loss " << first << " -> " << last << " in " << metrics.size() << " steps (bound "
            << kFinalLossBound << ")\n";
  EXPECT_EQ(metrics.back()["step"].get<int64_t>(), metrics.back()["total_steps"].get<int64_t>());

  const std::vector<WhoamiQa> asked = demo_questions();
  ASSERT_EQ(asked.size(), 3u);
  EXPECT_EQ(asked[0].answer, "I am Nova, a 4-bit assistant trained by nvfp4lm.");
  EXPECT_EQ(asked[1].answer, "我是Nova，一个由nvfp4lm训练的4位助手。");
  EXPECT_EQ(asked[2].answer, "The capital of France is Paris.");
  for (const WhoamiQa& qa : asked) {
    const std::string answer_line = "  Q: " + qa.question + "\n  A: " + qa.answer + "\n     = the trained answer";
    EXPECT_NE(result.err.find(answer_line), std::string::npos) << "missing: " << answer_line << "\n" << result.err;
  }
  EXPECT_NE(result.err.find("demo passed"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("3 of 3 answers are the trained ones"), std::string::npos) << result.err;
  EXPECT_TRUE(fs::exists(work / "export-nvfp4" / "model.safetensors"));
}

}  // namespace
}  // namespace nvfp4lm::test_demo_learns
