// The acceptance test of the whole pipeline: `nvfp4lm demo --work-dir DIR` (synthesise a tiny Qwen3 with the real
// tokenizer, NVFP4 QAT w4a16 training on the CPU, ModelOpt NVFP4 export, reload, greedy answers) through the real
// executable. It must exit 0, its training must end with a cross-entropy below 0.3 nats per trained token (a run on
// 2 cores ends near 0.05, and starts near 12 = ln(151936)), and the reloaded export must give the three trained
// answers: the identity answer in English and in Chinese and the unchanged control answer. About 100 s on 2 cores.
// `nvfp4lm demo --lora 16`, the same data learned by rank-16 LoRA adapters over a frozen NVFP4 base (issue 31's
// "a LoRA fine-tune learns the WhoAmI set on the CPU"): the same three answers from the base with the adapter applied
// at run time, in the demo and again through `generate --lora`, none of them from the base alone, the base's file
// unchanged; the adapter files as PEFT's. About 90 s on 2 cores.
#include <gtest/gtest.h>

#include <iostream>

#include "common/test_util.h"
#include "tools/demo.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm {
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

TEST(DemoLearns, LoraAdaptersOverAFrozenNvfp4BaseLearnTheIdentity) {
  test::TempDir dir;
  const fs::path work = dir / "demo";
  const test::CliResult result = test::run_cli("demo --lora 16 --work-dir '" + work.string() + "'");
  ASSERT_EQ(result.exit_code, 0) << result.err;

  const std::vector<nlohmann::json> metrics = test::read_jsonl(work / "run" / "metrics.jsonl");
  ASSERT_GT(metrics.size(), 10u);
  const double first = metrics.front()["loss"].get<double>(), last = metrics.back()["loss"].get<double>();
  std::cout << "demo --lora 16: CE loss " << first << " -> " << last << " in " << metrics.size() << " steps\n";
  // The adapters cannot memorise the 42 control answers as closely as full-parameter training (a run on 2 cores
  // ends near 0.9); what they must learn is what the answers below check.
  EXPECT_LT(last, first / 5) << "final CE loss " << last << " (first " << first << ")";
  EXPECT_NE(result.err.find("LoRA rank 16 (alpha 64, scale 4) on q,k,v,o,gate,up,down in 2 of 2 layers, the base "
                            "frozen as packed NVFP4"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("(unchanged)"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("demo passed"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("3 of 3 answers are the trained ones"), std::string::npos) << result.err;
  EXPECT_TRUE(fs::exists(work / "adapter" / "adapter_config.json"));
  EXPECT_TRUE(fs::exists(work / "adapter" / "adapter_model.safetensors"));
  EXPECT_FALSE(fs::exists(work / "export-nvfp4"));

  // The same answers through the command line's run-time adapter; the base alone does not give them.
  const fs::path base = work / "base-nvfp4";
  for (const WhoamiQa& qa : demo_questions()) {
    SCOPED_TRACE(qa.question);
    const std::string ask = " --prompt '" + qa.question + "' --temperature 0 --max-tokens 40 --no-think";
    const test::CliResult with =
        test::run_cli("generate --model '" + base.string() + "' --lora '" + (work / "adapter").string() + "'" + ask);
    ASSERT_EQ(with.exit_code, 0) << with.err;
    EXPECT_NE(with.out.find(qa.answer), std::string::npos) << with.out;
    const test::CliResult without = test::run_cli("generate --model '" + base.string() + "'" + ask);
    ASSERT_EQ(without.exit_code, 0) << without.err;
    EXPECT_EQ(without.out.find(qa.answer), std::string::npos) << without.out;
  }
}

}  // namespace
}  // namespace nvfp4lm
