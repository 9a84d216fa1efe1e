// Usage errors (issue 28): a flag value or combination that cannot run exits with code 2 and one line saying what is
// wrong and what to give instead, before anything is loaded or written: choices checked while the command line is
// parsed (quantize/export --format, --block, synth --preset), numbers whose 0 would mean "unset" (--steps,
// --save-every-steps, eval --seq-len), train's --output-dat name, a bare `tokenize`, and --train-last-layers, which
// is known to be too large only once the model is read.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test::test_usage_errors {
namespace {

class UsageErrors : public ::testing::Test {
 protected:
  void expect_usage_error(const std::string& args, std::initializer_list<std::string> parts) const {
    const CliResult result = run_cli(args, "", "", dir_.path());
    expect_one_line_error(result, parts, args);
    EXPECT_EQ(result.exit_code, 2) << args << ": " << result.err;
    EXPECT_TRUE(fs::is_empty(dir_.path())) << args << " wrote into the working directory";
  }

  TempDir dir_;
};

TEST_F(UsageErrors, QuantizeFormatAndBlockAreChoices) {
  expect_usage_error("quantize m out --format fp8", {"--format", "'fp8'", "dat, modelopt, compressed-tensors or gguf"});
  expect_usage_error("quantize m out --format dat --block 3d", {"--block", "'3d'", "1d", "2d"});
  expect_usage_error("quantize m out --format gguf --gguf-type q2_k", {"--gguf-type", "q2_k"});
}

TEST_F(UsageErrors, ExportFormatIsAChoice) {
  expect_usage_error("export run out --format fp8",
                     {"--format", "'fp8'", "modelopt, compressed-tensors, dat, bf16 or gguf"});
  expect_usage_error("export run out --dtype f8", {"--dtype", "'f8'", "bf16, f32 or f16"});
}

TEST_F(UsageErrors, BareTokenizeNamesWhatToGive) {
  expect_usage_error("tokenize", {"--model MODEL or --tokenizer DIR"});
}

TEST_F(UsageErrors, SynthPresetIsAChoice) {
  expect_usage_error("synth --preset huge out", {"--preset", "'huge'", "tiny, small, qwen3-4b"});
  expect_usage_error("synth out", {"exactly one of --config FILE and --preset"});
}

TEST_F(UsageErrors, ZeroIsNotAValueOfCountsWhereItMeansUnset) {
  expect_usage_error("train --model m --data d --steps 0", {"--max-steps", "0 is out of range", "[1, "});
  expect_usage_error("train --model m --data d --max-steps 0", {"--max-steps", "0 is out of range"});
  expect_usage_error("train --model m --data d --save-every-steps 0", {"--save-every", "0 is out of range", "[1, "});
  expect_usage_error("eval --model m --data d --seq-len 0", {"--seq-len", "0 is out of range", "[2, "});
  expect_usage_error("eval --model m --data d --stride 0", {"--stride", "0 is out of range"});
}

TEST_F(UsageErrors, OutputDatMustNameADatFile) {
  expect_usage_error("train --model m --data d --output run --output-dat x.txt",
                     {"--output-dat x.txt", "name a .dat file", "--export DIR"});
}

TEST_F(UsageErrors, TrainLastLayersAboveTheModelsLayers) {
  const fs::path data = write_pairs_jsonl(dir_ / "pairs.jsonl", 4);
  const fs::path run = dir_ / "run";
  const CliResult result =
      run_cli("train " + tiny_train_flags(data) + " --output " + quoted(run) + " --train-last-layers 3");
  expect_one_line_error(result, {"--train-last-layers 3", "2 layers", "use 1..2"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_FALSE(fs::exists(run / "metrics.jsonl")) << "the run started";
}

TEST_F(UsageErrors, ChoicesOfTrainRowsAreCheckedWhereverTheyAreTaken) {
  expect_usage_error("train --model m --data d --qat w3a8", {"--qat", "'w3a8'"});
  expect_usage_error("bench train --preset tiny --seq-len 8 --batch 1 --qat w3a8", {"--qat", "'w3a8'"});
  expect_usage_error("generate --model m --prompt hi --cuda-graph maybe", {"--cuda-graph", "'maybe'", "on or off"});
  expect_usage_error("generate --model m --prompt hi --cpu-matmul int4", {"--cpu-matmul", "int4"});
  expect_usage_error("bench infer --preset huge", {"--preset", "'huge'"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_usage_errors
