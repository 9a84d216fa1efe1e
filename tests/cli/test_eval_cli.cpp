// `nvfp4lm eval`, `quantize --calibrate`, `export` (calibrated or not) and `train --eval-split` through the real
// executable, on the fixture model with the tiny tokenizer: eval prints the header line (device, compute path,
// precision), a progress bar on stderr and the result (--json: one object, with KL 0 against the model itself);
// empty data and a reference of another vocabulary are one-line errors; a calibrated quantize says so in
// hf_quant_config.json (W4A4, quant_algo NVFP4); every uncalibrated ModelOpt export (also a second one of the same
// checkpoint) is weight-only (W4A16_NVFP4) and says so; a quantized lm_head warns which engine refuses it; train
// shows the evaluation in its progress lines.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "core/json_text.h"
#include "io/synth_model.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test::test_eval_cli {
namespace {

using json = nlohmann::json;

std::string tiny_model_flags() {
  return "--model " + quoted(tiny_model_dir()) + " --tokenizer " + quoted(tiny_tokenizer_dir());
}

TEST(EvalCli, PrintsHeaderProgressAndJsonWithZeroKlAgainstItself) {
  TempDir dir;
  const fs::path data = write_pairs_jsonl(dir / "pairs.jsonl", 6);
  const CliResult result = run_cli("eval " + tiny_model_flags() + " --data " + quoted(data) + " --reference " +
                                   quoted(tiny_model_dir()) + " --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err.rfind("nvfp4lm eval: device cpu, compute path cpu/dense, precision fp32", 0), 0u) << result.err;
  EXPECT_NE(result.err.find("eval ["), std::string::npos) << result.err;
  const json out = json::parse(result.out);
  EXPECT_GT(out["tokens"].get<int64_t>(), 0);
  EXPECT_NEAR(out["perplexity"].get<double>(), std::exp(out["loss"].get<double>()),
              1e-9 * out["perplexity"].get<double>());
  EXPECT_EQ(out["reference"]["kl_mean"].get<double>(), 0.0);
  EXPECT_EQ(out["reference"]["top1_agreement"].get<double>(), 1.0);

  const CliResult text = run_cli("eval " + tiny_model_flags() + " --data " + quoted(data) + " --max-tokens 20");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("tokens scored   20"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("perplexity"), std::string::npos) << text.out;
}

TEST(EvalCli, EmptyDataAndAnotherVocabularyAreOneLineErrors) {
  TempDir dir;
  write_file(dir / "empty.txt", "");
  expect_one_line_error(run_cli("eval " + tiny_model_flags() + " --data " + quoted(dir / "empty.txt")),
                        {"empty.txt", "no sample to evaluate"});
  Qwen3Config config = parse_qwen3_config(read_json_file(tiny_model_dir() / "config.json"), "fixture");
  config.vocab_size = 640;
  SynthOptions synth;
  synth.bundled_tokenizer = false;
  synth_model(config, dir / "other", synth);
  const fs::path data = write_pairs_jsonl(dir / "pairs.jsonl", 2);
  expect_one_line_error(
      run_cli("eval " + tiny_model_flags() + " --data " + quoted(data) + " --reference " + quoted(dir / "other")),
      {"--reference", "vocabulary of 640 tokens", "512"});
  expect_one_line_error(run_cli("eval " + tiny_model_flags() + " --data " + quoted(data) + " --seq-len 16 --stride 16"),
                        {"--stride 16"});
}

TEST(EvalCli, CalibratedQuantizeAndUncalibratedExportsSaySo) {
  TempDir dir;
  write_file(dir / "calib.txt", "Some text to run the model on, twice over: some text to run the model on.");
  const CliResult calibrated =
      run_cli("quantize " + quoted(tiny_model_dir()) + " " + quoted(dir / "q") + " --format modelopt --tokenizer " +
              quoted(tiny_tokenizer_dir()) + " --calibrate " + quoted(dir / "calib.txt"));
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.err;
  EXPECT_EQ(read_json_file(dir / "q" / "hf_quant_config.json")["nvfp4lm"]["input_scale"], "calibrated");
  EXPECT_EQ(read_json_file(dir / "q" / "hf_quant_config.json")["quantization"]["quant_algo"], "NVFP4");
  EXPECT_EQ(calibrated.err.find("weight-only"), std::string::npos) << calibrated.err;
  EXPECT_EQ(calibrated.err.find("lm_head is quantized"), std::string::npos) << calibrated.err;
  EXPECT_NE(calibrated.err.find("nvfp4lm quantize --calibrate: device cpu"), std::string::npos) << calibrated.err;

  const fs::path data = write_pairs_jsonl(dir / "pairs.jsonl", 8);
  const CliResult trained = run_cli("train " + tiny_train_flags(data, {{"--max-steps", "2"}}) + " --output " +
                                    quoted(dir / "run") + " --eval-split 0.25 --eval-every 1");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_NE(trained.err.find("| eval loss "), std::string::npos) << trained.err;
  EXPECT_NE(trained.err.find("evaluation loss: best"), std::string::npos) << trained.err;
  for (const char* out : {"e1", "e2"}) {
    const CliResult exported = run_cli("export " + quoted(dir / "run") + " " + quoted(dir / out));
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
    EXPECT_NE(exported.err.find("weight-only NVFP4 (quant_algo W4A16_NVFP4, no input_scale)"), std::string::npos)
        << exported.err;
    const json quant_config = read_json_file(dir / out / "hf_quant_config.json");
    EXPECT_EQ(quant_config["nvfp4lm"]["input_scale"], "none");
    EXPECT_EQ(quant_config["quantization"]["quant_algo"], "W4A16_NVFP4");
  }
  const CliResult recalibrated = run_cli("export " + quoted(dir / "run") + " " + quoted(dir / "e3") + " --calibrate " +
                                         quoted(dir / "calib.txt") + " --calibrate-tokens 8");
  ASSERT_EQ(recalibrated.exit_code, 0) << recalibrated.err;
  EXPECT_EQ(read_json_file(dir / "e3" / "hf_quant_config.json")["nvfp4lm"]["calibration"]["tokens"], 8);
  EXPECT_EQ(read_json_file(dir / "e3" / "hf_quant_config.json")["quantization"]["quant_algo"], "NVFP4");

  // A quantized lm_head: the export says which engine cannot load it.
  const CliResult head = run_cli("export " + quoted(dir / "run") + " " + quoted(dir / "e4") + " --quantize-lm-head");
  ASSERT_EQ(head.exit_code, 0) << head.err;
  EXPECT_NE(head.err.find("lm_head is quantized (--quantize-lm-head): vLLM"), std::string::npos) << head.err;
}

}  // namespace
}  // namespace nvfp4lm::test::test_eval_cli
