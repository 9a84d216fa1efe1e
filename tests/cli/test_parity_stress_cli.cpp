// `nvfp4lm parity` and `nvfp4lm stress kv` end to end through the real executable on a small model made by the CLI
// itself (synth with the fixture shape and tokenizer, then quantize): the header line, the table, exit 0 when every
// pair passes; exit 1 with one error line naming the pair for --other = a copy with one corrupted block scale; exit 2
// for bad flag values.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "tools/tools_test_util.h"

namespace nvfp4lm::test::test_parity_stress_cli {
namespace {

class CliParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const CliResult synth =
        run_cli("synth --config " + quoted(fixture_path("qwen3-tiny/config.json")) + " --tokenizer " +
                quoted(fixture_path("tiny-tokenizer")) + " --seed 4 " + quoted(*dir_ / "dense"));
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
    for (const char* format : {"dat", "modelopt"}) {
      const CliResult quantize =
          run_cli("quantize " + quoted(*dir_ / "dense") + " " + quoted(*dir_ / format) + " --format " + format);
      ASSERT_EQ(quantize.exit_code, 0) << quantize.err;
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string model(const char* name) { return " --model " + quoted(*dir_ / name); }
  static TempDir* dir_;
};
TempDir* CliParity::dir_ = nullptr;

TEST_F(CliParity, TinyModelPassesOnTheCpu) {
  const CliResult result = run_cli("parity" + model("dat") + " --device cpu --new-tokens 4");
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  EXPECT_EQ(result.err.rfind("nvfp4lm parity: device cpu, compute path every inference path", 0), 0u) << result.err;
  for (const char* part : {"cpu-cache vs reference", "cpu-dense vs reference", "copy-modelopt vs reference",
                           "copy-dat vs copy-modelopt", "copy-bf16 vs reference",
                           "cuda           skipped: no CUDA "
                           "device: --device cpu",
                           "prompt 2: ", "PASS: "})
    EXPECT_NE(result.out.find(part), std::string::npos) << part << "\n" << result.out;
  EXPECT_EQ(result.out.find("FAIL"), std::string::npos) << result.out;

  const CliResult json = run_cli("parity" + model("modelopt") + " --device cpu --new-tokens 2 --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json report = nlohmann::json::parse(json.out);
  EXPECT_TRUE(report["pass"].get<bool>());
  EXPECT_EQ(report["paths"][0]["name"], "reference");
  EXPECT_EQ(report["paths"][0]["compute_path"], "cpu/dequant-gemm");
}

// The predecessor's known-good baseline through the executable: written by a passing run, checked by a later one (the
// same model: PASS, every path unmoved); a file already there is not replaced; --baseline brings its own prompts.
TEST_F(CliParity, WritesABaselineAndChecksAgainstIt) {
  const std::string parity = "parity" + model("dat") + " --device cpu --new-tokens 3 --train-forward off";
  const fs::path file = *dir_ / "known-good.json";
  const CliResult written = run_cli(parity + " --write-baseline " + quoted(file));
  ASSERT_EQ(written.exit_code, 0) << written.err;
  EXPECT_NE(written.err.find("wrote the baseline"), std::string::npos) << written.err;
  const nlohmann::json baseline = nlohmann::json::parse(read_file(file));
  EXPECT_EQ(baseline["nvfp4lm_parity_baseline"], 1);
  EXPECT_EQ(baseline["new_tokens"], 3);
  const CliResult checked = run_cli(parity + " --baseline " + quoted(file));
  ASSERT_EQ(checked.exit_code, 0) << checked.err << checked.out;
  EXPECT_NE(checked.out.find("against the baseline"), std::string::npos) << checked.out;
  EXPECT_NE(checked.out.find("greedy continuation is the baseline's"), std::string::npos) << checked.out;
  expect_one_line_error(run_cli(parity + " --write-baseline " + quoted(file)), {"known-good.json", "exists"});
  write_file(*dir_ / "one.txt", "Hello.\n");
  const CliResult both = run_cli(parity + " --baseline " + quoted(file) + " --prompts " + quoted(*dir_ / "one.txt"));
  EXPECT_EQ(both.exit_code, 2) << both.err;
}

TEST_F(CliParity, PromptsFromAFile) {
  write_file(*dir_ / "prompts.txt", "What is 2 + 2?\n\n  \nName a colour.\n");
  const CliResult result =
      run_cli("parity" + model("dat") + " --device cpu --new-tokens 1 --prompts " + quoted(*dir_ / "prompts.txt"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("prompt 1: \"What is 2 + 2?\""), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("prompt 2: \"Name a colour.\""), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("prompt 3:"), std::string::npos) << result.out;
}

TEST_F(CliParity, CorruptedBlockScaleFailsNamingThePair) {
  TempDir work;
  fs::copy(*dir_ / "modelopt", work / "corrupt", fs::copy_options::recursive);
  corrupt_block_scale(work / "corrupt", "model.layers.0.self_attn.q_proj.weight");
  const CliResult result =
      run_cli("parity" + model("modelopt") + " --device cpu --new-tokens 2 --other " + quoted(work / "corrupt"));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  expect_one_line_error(result, {"parity: ", "over tolerance", "other vs reference (other, prompt 1)"});
  EXPECT_NE(result.out.find("FAIL"), std::string::npos) << "the table is printed before the verdict: " << result.out;

  // The same copy before the damage passes: the check is about the scale byte, not about --other.
  fs::remove_all(work / "corrupt");
  fs::copy(*dir_ / "modelopt", work / "clean", fs::copy_options::recursive);
  const CliResult clean =
      run_cli("parity" + model("modelopt") + " --device cpu --new-tokens 2 --other " + quoted(work / "clean"));
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
}

TEST_F(CliParity, BadValuesAreUsageErrors) {
  const std::string parity = "parity" + model("dat") + " --device cpu ";
  for (const char* flags :
       {"--new-tokens 0", "--new-tokens -3", "--tolerance fp32", "--tolerance fp16=1", "--tolerance fp32=-1"}) {
    const CliResult result = run_cli(parity + flags);
    EXPECT_EQ(result.exit_code, 2) << flags << ": " << result.err;
    expect_one_line_error(result, {}, flags);
  }
  expect_one_line_error(run_cli("parity" + model("dat") + " --device tpu"), {"tpu"});
  expect_one_line_error(run_cli(parity + "--prompts " + quoted(*dir_ / "missing.txt")), {"missing.txt"});
  // A prompt past the context is refused before any forward (issue 33: 5,000 tokens on a 4,096 context ran > 900 s).
  std::string long_prompt;
  for (int i = 0; i < 5000; ++i) long_prompt += "word ";
  write_file(*dir_ / "long.txt", "Short one.\n" + long_prompt + "\n");
  expect_one_line_error(run_cli(parity + "--prompts " + quoted(*dir_ / "long.txt")),
                        {"prompt 2 has", "max_position_embeddings) is 4096", "--new-tokens"});
  write_file(*dir_ / "empty.txt", "\n \n");
  expect_one_line_error(run_cli(parity + "--prompts " + quoted(*dir_ / "empty.txt")), {"--prompts", "no prompt"});
  // Issue 53 item 6: a line that is not UTF-8 was the tokenizer's "convert it with to_valid_utf8() first".
  write_file(*dir_ / "latin1.txt", "Hello\nCaf\xe9 au lait\n");
  const CliResult latin1 = run_cli(parity + "--prompts " + quoted(*dir_ / "latin1.txt"));
  expect_one_line_error(latin1, {"latin1.txt line 2", "not valid UTF-8 at byte 4", "0xE9", "save the file as UTF-8"});
  EXPECT_EQ(latin1.err.find("to_valid_utf8"), std::string::npos) << latin1.err;
}

TEST_F(CliParity, StressKvPassesAndReportsEachCase) {
  const CliResult result = run_cli("stress kv" + model("modelopt"));
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  EXPECT_EQ(result.err.rfind("nvfp4lm stress kv: device cpu, compute path cpu/dequant-gemm", 0), 0u) << result.err;
  for (const char* part : {"case", "max |Δlogit|", "time", "cache exactly full", "rewind", "chat turns", "PASS: "})
    EXPECT_NE(result.out.find(part), std::string::npos) << part << "\n" << result.out;
  const CliResult json = run_cli("stress kv" + model("dat") + " --json --max-cache 40");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json report = nlohmann::json::parse(json.out);
  EXPECT_EQ(report["failed"], 0);
  EXPECT_EQ(report["largest_cache"], 40);
  for (const auto& c : report["cases"]) EXPECT_LE(c["cache_tokens"].get<int64_t>(), 40) << c["name"];

  expect_one_line_error(run_cli("stress kv" + model("dat") + " --max-cache -1"), {"--max-cache"});
  // A cache no case fits checks nothing: an error, not "PASS: 0 cases" (issue 33).
  expect_one_line_error(run_cli("stress kv" + model("dat") + " --max-cache 1"), {"no case", "--max-cache"});
  expect_one_line_error(run_cli("stress kv" + model("dat") + " --tolerance fp32=x"), {"--tolerance"});
  const CliResult bare = run_cli("stress" + model("dat"));
  EXPECT_EQ(bare.exit_code, 2) << bare.err;
}

}  // namespace
}  // namespace nvfp4lm::test::test_parity_stress_cli
