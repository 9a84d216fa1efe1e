// `nvfp4lm train` and `nvfp4lm export` through the real executable, on the fixture model with the tiny tokenizer
// (tests/train/trainer_test_support.h): a run with --export and --memory-report (header, summary, metrics.jsonl,
// memory JSON, a model that `generate` runs); exports of its checkpoint in every format that reload and generate and
// never replace an existing directory without --overwrite; --resume that skips a damaged newest checkpoint and still
// reproduces the uninterrupted run's losses; and one-line errors (exit code != 0) naming the flag, file or line for
// bad flags, bad data, impossible resumes, a run directory that already holds checkpoints and --device cuda without
// a usable GPU (never a silent fallback to the CPU).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/test_util.h"
#include "io/model_files.h"
#include "io/safetensors_reader.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test::test_train_cli {
namespace {

using json = nlohmann::json;

std::vector<double> losses_of(const fs::path& metrics) {
  std::vector<double> losses;
  for (const json& record : read_jsonl(metrics)) losses.push_back(record["loss"].get<double>());
  return losses;
}

size_t count_occurrences(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++count;
  return count;
}

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override { data_ = write_pairs_jsonl(dir_ / "pairs.jsonl", 8); }
  std::string train(const std::string& extra, const std::map<std::string, std::string>& changed = {}) const {
    return "train " + tiny_train_flags(data_, changed) + " " + extra;
  }

  TempDir dir_;
  fs::path data_;
};

TEST_F(TrainCli, TrainsExportsAndReportsMemoryAndMetrics) {
  const fs::path run = dir_ / "run", out = dir_ / "export", memory = dir_ / "memory.json";
  const CliResult result = run_cli(train("--output " + quoted(run) + " --export " + quoted(out) + " --memory-report " +
                                         quoted(memory) + " --save-every 4"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err.rfind("nvfp4lm train: device cpu, compute path cpu/dequant-gemm", 0), 0u) << result.err;
  EXPECT_NE(result.err.find("done: 6 of 6 steps"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("exported NVFP4 (ModelOpt safetensors)"), std::string::npos) << result.err;
  EXPECT_TRUE(fs::is_directory(run / "step-4"));
  EXPECT_TRUE(fs::is_directory(run / "step-6"));

  const std::vector<json> metrics = read_jsonl(run / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), 6u);
  for (size_t i = 0; i < metrics.size(); ++i) {
    EXPECT_EQ(metrics[i]["step"], i + 1);
    for (const char* key : {"loss", "token_accuracy", "lr", "grad_norm", "tokens_per_s"})
      EXPECT_TRUE(metrics[i][key].is_number()) << key << " in " << metrics[i].dump();
  }
  std::set<std::string> phases;
  const json report = json::parse(read_file(memory));
  for (const json& phase : report["phases"]) {
    phases.insert(phase["phase"].get<std::string>());
    EXPECT_GT(phase["peak_bytes"].get<uint64_t>(), 0u);
  }
  for (const char* phase : {"load", "forward", "backward", "optimizer", "export"})
    EXPECT_TRUE(phases.count(phase)) << phase << " missing from " << read_file(memory);

  EXPECT_EQ(open_model(out)->format(), ModelFormat::ModeloptNvfp4);
  const CliResult generated =
      run_cli("generate --model " + quoted(out) + " --prompt 'What is 2 plus 3?' --max-tokens 6 --temperature 0");
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  EXPECT_FALSE(generated.out.empty());
}

TEST_F(TrainCli, ExportWritesEveryFormatAndNeverOverwritesWithoutTheFlag) {
  const fs::path run = dir_ / "run";
  ASSERT_EQ(run_cli(train("--output " + quoted(run))).exit_code, 0);
  const std::map<std::string, ModelFormat> formats = {
      {"modelopt", ModelFormat::ModeloptNvfp4}, {"dat", ModelFormat::Dat}, {"bf16", ModelFormat::HfSafetensors}};
  for (const auto& [flag, format] : formats) {
    const fs::path out = dir_ / ("export-" + flag);
    // From a checkpoint directory and from the run directory (its newest checkpoint).
    const fs::path input = flag == "dat" ? run : run / "step-6";
    const CliResult exported = run_cli("export " + quoted(input) + " " + quoted(out) + " --format " + flag);
    ASSERT_EQ(exported.exit_code, 0) << flag << ": " << exported.err;
    EXPECT_NE(exported.err.find("step 6"), std::string::npos) << exported.err;
    EXPECT_EQ(open_model(out)->format(), format) << flag;
    const CliResult generated =
        run_cli("generate --model " + quoted(out) + " --prompt 'What is 4 plus 3?' --max-tokens 6 --temperature 0");
    EXPECT_EQ(generated.exit_code, 0) << flag << ": " << generated.err;
    EXPECT_FALSE(generated.out.empty()) << flag;
  }

  const fs::path out = dir_ / "export-modelopt";
  const std::string before = read_file(out / "model.safetensors");
  expect_one_line_error(run_cli("export " + quoted(run) + " " + quoted(out) + " --format bf16"),
                        {out.string(), "already exists", "--overwrite"}, "existing OUT");
  EXPECT_EQ(read_file(out / "model.safetensors"), before);
  expect_one_line_error(run_cli("export " + quoted(run) + " " + quoted(run / "step-6") + " --overwrite"),
                        {"refusing to write the export"}, "OUT = the checkpoint");
  expect_one_line_error(run_cli("export " + quoted(run) + " " + quoted(run) + " --overwrite"),
                        {"refusing to write the export"}, "OUT = the run directory");
  expect_one_line_error(run_cli("export " + quoted(run) + " " + quoted(dir_ / "x") + " --format onnx"),
                        {"--format", "onnx", "modelopt, compressed-tensors, dat, bf16 or gguf"}, "--format onnx");
  expect_one_line_error(run_cli("export " + quoted(dir_ / "nothing") + " " + quoted(dir_ / "x")),
                        {(dir_ / "nothing").string()}, "missing checkpoint");
  ASSERT_EQ(run_cli("export " + quoted(run) + " " + quoted(out) + " --format bf16 --overwrite").exit_code, 0);
  EXPECT_EQ(open_model(out)->format(), ModelFormat::HfSafetensors);

  // train --export into an existing directory is refused before any training.
  expect_one_line_error(run_cli(train("--output " + quoted(dir_ / "run2") + " --export " + quoted(out))),
                        {"--overwrite"}, "train --export existing");
  EXPECT_FALSE(fs::exists(dir_ / "run2" / "metrics.jsonl"));
}

// A LoRA run through the command line: the header names the adapters, --export writes a PEFT adapter, `export` of the
// run writes the same one, `export --merge-lora --format bf16` a whole model that generate runs, and a whole-model
// format without --merge-lora is a one-line error naming it.
TEST_F(TrainCli, LoraTrainsExportsItsAdapterAndMerges) {
  const fs::path run = dir_ / "run", adapter = dir_ / "adapter";
  // The base typed as a relative path (a link to the tiny model, run from dir_): both adapter exports name it as
  // typed, as PEFT writes the name given to from_pretrained, never the training machine's absolute path (issue 49).
  fs::create_directory_symlink(tiny_model_dir(), dir_ / "base");
  const CliResult trained = run_cli(
      train("--output " + quoted(run) + " --lora 4 --lora-alpha 8 --lora-targets q,v,down --export " + quoted(adapter),
            {{"--model", "base"}}),
      "", "", dir_.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_EQ(json::parse(read_file(adapter / "adapter_config.json"))["base_model_name_or_path"], "base");
  // The default --qat w4a16 trains the adapters over the dense base's NVFP4 quantization: the run says so loudly,
  // when it starts and when it exports (issue 49).
  const std::string quantized_base = "the adapters train over its NVFP4 quantization";
  EXPECT_NE(trained.err.find("the base frozen quantized to NVFP4 from its dense weights"), std::string::npos)
      << trained.err;
  EXPECT_EQ(count_occurrences(trained.err, quantized_base), 2u) << trained.err;
  EXPECT_NE(trained.err.find("LoRA rank 4 (alpha 8, scale 2) on q,v,down in 2 of 2 layers"), std::string::npos)
      << trained.err;
  EXPECT_NE(trained.err.find("exported the LoRA adapter (PEFT"), std::string::npos) << trained.err;
  EXPECT_EQ(json::parse(read_file(adapter / "adapter_config.json"))["target_modules"],
            json({"q_proj", "v_proj", "down_proj"}));
  const CliResult exported = run_cli("export " + quoted(run) + " " + quoted(dir_ / "again"));
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(read_file(dir_ / "again" / "adapter_model.safetensors"), read_file(adapter / "adapter_model.safetensors"));
  EXPECT_EQ(read_file(dir_ / "again" / "adapter_config.json"), read_file(adapter / "adapter_config.json"));
  EXPECT_NE(exported.err.find(quantized_base), std::string::npos) << exported.err;
  // The adapter's model card (README.md, as PEFT writes one) names the base in its front matter and says which base
  // the adapters' function needs; both exports write the same one.
  const std::string card = read_file(adapter / "README.md");
  EXPECT_EQ(card.rfind("---\nbase_model: \"base\"\nlibrary_name: peft\n", 0), 0u) << card;
  EXPECT_NE(card.find(quantized_base), std::string::npos) << card;
  EXPECT_NE(card.find("`nvfp4lm quantize base OUT --format modelopt`"), std::string::npos) << card;
  EXPECT_NE(card.find("rank 4, alpha 8, over q_proj, v_proj, down_proj"), std::string::npos) << card;
  EXPECT_EQ(read_file(dir_ / "again" / "README.md"), card);
  // eval --lora: over the base quantized as the run quantized it the adapter scores its training data better than
  // the base alone; over the dense base it computes another function (the numbers: bench/NOTES.md).
  const fs::path quantized = dir_ / "base-nvfp4";
  ASSERT_EQ(run_cli("quantize " + quoted(tiny_model_dir()) + " " + quoted(quantized) + " --format modelopt").exit_code,
            0);
  const auto eval_loss = [&](const fs::path& model, const std::string& lora) {
    const CliResult result = run_cli("eval --model " + quoted(model) + " --tokenizer " + quoted(tiny_tokenizer_dir()) +
                                     " --data " + quoted(data_) + lora + " --json");
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return result.exit_code == 0 ? json::parse(result.out)["loss"].get<double>() : 0.0;
  };
  const double over_quantized = eval_loss(quantized, " --lora " + quoted(adapter));
  const double quantized_alone = eval_loss(quantized, "");
  const double over_dense = eval_loss(tiny_model_dir(), " --lora " + quoted(adapter));
  std::fprintf(stderr,
               "eval loss: adapter over the quantized base %.5f, the quantized base alone %.5f, adapter over "
               "the dense base %.5f\n",
               over_quantized, quantized_alone, over_dense);
  EXPECT_LT(over_quantized, quantized_alone);
  EXPECT_NE(over_quantized, over_dense);
  expect_one_line_error(run_cli("export " + quoted(run) + " " + quoted(dir_ / "whole") + " --format bf16"),
                        {"LoRA run's checkpoint", "--merge-lora"}, "whole-model format of a LoRA run");
  const CliResult merged =
      run_cli("export " + quoted(run) + " " + quoted(dir_ / "merged") + " --merge-lora --format bf16");
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_EQ(open_model(dir_ / "merged")->format(), ModelFormat::HfSafetensors);
  const CliResult generated = run_cli("generate --model " + quoted(dir_ / "merged") +
                                      " --prompt 'What is 4 plus 3?' --max-tokens 6 --temperature 0");
  EXPECT_EQ(generated.exit_code, 0) << generated.err;
  expect_one_line_error(run_cli(train("--output " + quoted(dir_ / "run3") + " --lora-alpha 8")), {"--lora"},
                        "--lora-alpha without --lora");

  // --qat-steps: the merge trained with QAT, exported as NVFP4, its run kept beside the checkpoints; the flag
  // mistakes are one-line errors.
  const CliResult recovered =
      run_cli("export " + quoted(run) + " " + quoted(dir_ / "recovered") + " --merge-lora --qat-steps 3 --qat-lr 1e-3");
  ASSERT_EQ(recovered.exit_code, 0) << recovered.err;
  EXPECT_NE(recovered.err.find("nvfp4lm export --merge-lora --qat-steps: device cpu"), std::string::npos)
      << recovered.err;
  EXPECT_EQ(open_model(dir_ / "recovered")->format(), ModelFormat::ModeloptNvfp4);
  EXPECT_EQ(read_jsonl(run / "merge-qat" / "metrics.jsonl").size(), 3u);
  EXPECT_TRUE(fs::exists(run / "merge-qat-start" / "model.safetensors"));
  expect_one_line_error(run_cli("export " + quoted(run) + " " + quoted(dir_ / "r2") + " --merge-lora --qat-steps 3"),
                        {"merge-qat", "--resume", "--qat-output"}, "a second --qat-steps into the same run directory");
  expect_one_line_error(run_cli("export " + quoted(run) + " " + quoted(dir_ / "r3") + " --qat-steps 3"),
                        {"--merge-lora"}, "--qat-steps without --merge-lora");
  expect_one_line_error(run_cli("export " + quoted(run) + " " + quoted(dir_ / "r4") + " --merge-lora --qat-lr 1e-3"),
                        {"--qat-steps"}, "--qat-lr without --qat-steps");
  expect_one_line_error(run_cli("export " + quoted(run) + " " + quoted(dir_ / "r5") +
                                " --merge-lora --format bf16 --qat-steps 3 --qat-output " + quoted(dir_ / "q5")),
                        {"--qat-steps", "bf16"}, "--qat-steps with a BF16 export");
  EXPECT_FALSE(fs::exists(dir_ / "q5"));
}

// A run that died after step 4, while its step-4 checkpoint was being damaged (model file cut short) and a step-6
// write had begun (step-6.tmp), resumes from step-2 with a warning and ends with exactly the losses of a run that
// was never interrupted (the flags given again with their saved values change nothing).
// Issue 50: a GRPO run killed with SIGKILL mid-run and resumed from its last checkpoint samples the same completions,
// scores the same rewards and ends with the same weights as the run that was never killed (the sampling seeds are a
// function of the run's seed, step and completion, so no generator state is lost with the process).
TEST_F(TrainCli, AGrpoRunKilledWithSigkillResumesToTheSameRewardsAndWeights) {
  std::string prompts;
  for (int i = 0; i < 24; ++i)
    prompts += nlohmann::json{{"prompt", fmt::format("What is {} plus {}?", 2 + i % 8, 3 + 2 * (i / 8))}}.dump() + "\n";
  write_file(dir_ / "prompts.jsonl", prompts);
  const std::vector<std::string> flags = {"train",
                                          "--model",
                                          tiny_model_dir().string(),
                                          "--tokenizer",
                                          tiny_tokenizer_dir().string(),
                                          "--data",
                                          (dir_ / "prompts.jsonl").string(),
                                          "--objective",
                                          "grpo",
                                          "--reward",
                                          "regex:^[0-9]",
                                          "--batch",
                                          "4",
                                          "--num-generations",
                                          "8",
                                          "--max-completion-tokens",
                                          "8",
                                          "--lr",
                                          "1e-2",
                                          "--lr-schedule",
                                          "constant",
                                          "--seq-len",
                                          "64",
                                          "--max-steps",
                                          "30",
                                          "--save-every",
                                          "3",
                                          "--seed",
                                          "5"};
  std::string args;
  for (size_t i = 1; i < flags.size(); ++i) args += " " + quoted(fs::path(flags[i]));
  const fs::path straight = dir_ / "straight", run = dir_ / "run";
  const CliResult whole = run_cli("train" + args + " --output " + quoted(straight));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;

  std::vector<std::string> argv = nvfp4lm_argv();
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--output", run.string()});
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::vector<char*> words;
    for (std::string& word : argv) words.push_back(word.data());
    words.push_back(nullptr);
    if (freopen("/dev/null", "w", stdout) == nullptr || freopen("/dev/null", "w", stderr) == nullptr) _exit(126);
    execv(words[0], words.data());
    _exit(127);
  }
  // Killed once 10 steps are in its metrics (a checkpoint at 9 is on disk), long before its 30th.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120 * emulated_time_factor());
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream metrics(run / "metrics.jsonl");
    const auto lines = std::count(std::istreambuf_iterator<char>(metrics), std::istreambuf_iterator<char>(), '\n');
    if (lines >= 10) break;
    usleep(5000);
  }
  ::kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the run ended before it was killed";
  ASSERT_FALSE(fs::exists(run / "step-30"));

  const CliResult resumed = run_cli("train --resume --output " + quoted(run));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const std::vector<nlohmann::json> a = read_jsonl(straight / "metrics.jsonl"), b = read_jsonl(run / "metrics.jsonl");
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i]["reward"], a[i]["reward"]) << "step " << i + 1;
    EXPECT_EQ(b[i]["loss"], a[i]["loss"]) << "step " << i + 1;
    EXPECT_EQ(b[i]["completions/mean_length"], a[i]["completions/mean_length"]) << "step " << i + 1;
  }
  EXPECT_GT(a.back()["reward"].get<double>(), a.front()["reward"].get<double>());
  EXPECT_EQ(read_text_file(run / "step-30" / "model.safetensors"),
            read_text_file(straight / "step-30" / "model.safetensors"));
}

TEST_F(TrainCli, ResumeSkipsADamagedCheckpointAndMatchesTheUninterruptedRun) {
  const fs::path straight = dir_ / "straight", run = dir_ / "run";
  ASSERT_EQ(run_cli(train("--output " + quoted(straight))).exit_code, 0);
  ASSERT_EQ(run_cli(train("--output " + quoted(run) + " --save-every 2 --keep 3")).exit_code, 0);
  fs::rename(run / "step-6", run / "step-6.tmp");
  const fs::path model = run / "step-4" / "model.safetensors";
  fs::resize_file(model, fs::file_size(model) / 2);

  const CliResult resumed = run_cli("train --resume --output " + quoted(run) + " --seq-len 64 --lr 2e-3");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("skipping checkpoint " + (run / "step-4").string()), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming " + (run / "step-2").string() + " at step 2 of 6"), std::string::npos)
      << resumed.err;
  EXPECT_EQ(losses_of(run / "metrics.jsonl"), losses_of(straight / "metrics.jsonl"));

  // Resuming a finished run trains nothing and succeeds; a longer schedule continues it, with a warning.
  const CliResult finished = run_cli("train --resume --output " + quoted(run));
  EXPECT_EQ(finished.exit_code, 0) << finished.err;
  EXPECT_NE(finished.err.find("already complete"), std::string::npos) << finished.err;
  const CliResult longer = run_cli("train --resume --output " + quoted(run) + " --max-steps 8");
  ASSERT_EQ(longer.exit_code, 0) << longer.err;
  EXPECT_NE(longer.err.find("--max-steps 8 (was 6)"), std::string::npos) << longer.err;
  EXPECT_EQ(read_jsonl(run / "metrics.jsonl").size(), 8u);
}

TEST_F(TrainCli, BadFlagsGiveOneLineErrorsNamingTheFlag) {
  const std::string output = " --output " + quoted(dir_ / "run");
  const struct {
    std::string args;
    std::vector<std::string> parts;
  } cases[] = {
      {train("", {{"--seq-len", "0"}}), {"--seq-len", "0"}},
      {train("", {{"--lr", "-1"}}), {"--lr", "-1"}},
      {train("", {{"--lr", "0"}}), {"--lr"}},
      {train("", {{"--batch", "0"}}), {"--batch"}},
      {train("--grad-accum 0"), {"--grad-accum"}},
      {train("--qat w3a8"), {"--qat", "w3a8", "w4a16"}},
      {train("--block 3d"), {"--block", "3d", "1d", "2d"}},
      {train("--loss mse"), {"--loss", "mse"}},
      {train("--lr-schedule step"), {"--lr-schedule", "step"}},
      {train("--optimizer sgd"), {"--optimizer", "sgd"}},
      {train("--master fp8"), {"--master", "fp8"}},
      {train("--export-format onnx"), {"--export-format", "onnx"}},
      {train("--nonfinite ignore"), {"--nonfinite", "ignore"}},
      {train("--data-format csv"), {"--data-format", "csv"}},
      {train("--data-template alpaca"), {"--data-template", "alpaca"}},
      {train("--chat-template llama"), {"--chat-template", "llama"}},
      {train("", {{"--warmup", "50"}}), {"--warmup", "50"}},
      {train("--min-lr-ratio 2"), {"--min-lr-ratio"}},
      {train("--keep 0"), {"--keep"}},
      {train("--max-memory -1"), {"--max-memory"}},
      {train("--epochs 2"), {"--epochs", "--max-steps"}},
      {train("--train-last-layers 5"), {"--train-last-layers", "5"}},
      {train("--objective rlhf"), {"--objective", "rlhf", "dpo"}},
      {train("--beta 0.5"), {"--beta", "--objective dpo"}},
      {train("--objective dpo --dpo-loss hinge"), {"--dpo-loss", "hinge", "ipo"}},
      {train("--objective dpo --loss l1"), {"--objective dpo", "--loss l1"}},
      {train("--objective dpo"), {"line 1", "missing \"chosen\""}},
      {train("--objective grpo"), {"--objective grpo needs --reward"}},
      {train("--objective grpo --reward bleu"), {"--reward", "bleu", "regex:PATTERN"}},
      {train("--reward exact"), {"--reward", "--objective grpo"}},
      {train("--objective grpo --reward exact --fused-update"), {"--objective grpo", "--fused-update"}},
      {train("--objective grpo --reward exact"), {"pairs.jsonl line 1", "--reward exact", "\"answer\""}},
      {train("--objective grpo --reward regex:x --beta -2"), {"--beta", "0 or more"}},
      {train("--num-generations 4"), {"--num-generations", "--objective grpo"}},
      {train("", {{"--data", ""}}), {"--data"}},
      {train("", {{"--model", ""}}), {"--model"}},
      {train("", {{"--tokenizer", quoted(dir_ / "no-tokenizer")}}), {(dir_ / "no-tokenizer").string()}},
  };
  for (const auto& c : cases) {
    const CliResult result = run_cli(c.args + output);
    EXPECT_NE(result.exit_code, 0) << c.args;
    const size_t at = result.err.find("error");
    ASSERT_NE(at, std::string::npos) << c.args << ": " << result.err;
    const std::string line = result.err.substr(at);
    EXPECT_EQ(line.find('\n'), line.size() - 1) << c.args << ": the error must be one line: " << result.err;
    for (const std::string& part : c.parts)
      EXPECT_NE(line.find(part), std::string::npos) << c.args << ": '" << part << "' not in: " << line;
  }
  EXPECT_FALSE(fs::exists(dir_ / "run" / "metrics.jsonl"));

  // The flags of the F# predecessor's workflow: bad values are usage errors (exit 2), one line naming the flag.
  const struct {
    std::string args;
    std::vector<std::string> parts;
  } usage_cases[] = {
      {train("--steps-per-epoch 0"), {"--steps-per-epoch", "0"}},
      {train("--max-layers 3"), {"--max-layers", "3", "2 layers"}},
      {train("--compute-dtype int8"), {"--compute-dtype", "int8", "float32", "bfloat16"}},
      {train("--compute-dtype bfloat16"), {"--compute-dtype bfloat16", "CUDA", "float32"}},
      {train("--compute-dtype float16"), {"float16", "bfloat16"}},
      {train("--in-features 64"), {"--in-features", "--synthetic"}},
      {train("--resume maybe"), {"--resume", "maybe", "auto"}},
      {train("--steps-per-epoch 2"), {"--steps-per-epoch", "--max-steps"}},
      {train("--output-dat " + quoted(dir_ / "x.dat") + " --export " + quoted(dir_ / "x")),
       {"--output-dat", "--export"}},
  };
  for (const auto& c : usage_cases) {
    const CliResult result = run_cli(c.args + output);
    EXPECT_EQ(result.exit_code, 2) << c.args << ": " << result.err;
    expect_one_line_error(result, {}, c.args);
    for (const std::string& part : c.parts)
      EXPECT_NE(result.err.find(part), std::string::npos) << c.args << ": '" << part << "' not in: " << result.err;
  }
}

TEST_F(TrainCli, BadDataGivesAnErrorNamingTheFileAndLine) {
  const fs::path bad = dir_ / "bad.jsonl";
  write_file(bad,
             "{\"prompt\": \"What is 2 plus 3?\", \"completion\": \"5\"}\n"
             "{\"prompt\": \"What is 4 plus 3?\", \"completion\": \"7\"}\n"
             "{\"prompt\": \"What is 1 plus 1?\", \"completion\": 2\n");
  const std::string flags = "--model " + quoted(tiny_model_dir()) + " --tokenizer " + quoted(tiny_tokenizer_dir()) +
                            " --seq-len 64 --output " + quoted(dir_ / "run");
  expect_one_line_error(run_cli("train " + flags + " --data " + quoted(bad)), {bad.string(), "line 3"}, "bad JSON");

  const fs::path missing = dir_ / "missing.jsonl";
  expect_one_line_error(run_cli("train " + flags + " --data " + quoted(missing)), {missing.string()}, "missing data");

  const fs::path schema = dir_ / "schema.jsonl";
  write_file(schema, "{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"question\": \"a\"}\n");
  expect_one_line_error(run_cli("train " + flags + " --data " + quoted(schema)), {schema.string(), "line 2"},
                        "missing keys");
  // Issue 53 item 4: a tool call whose arguments are not JSON stops the run at set-up, naming the line and key.
  const fs::path tools = dir_ / "tools.jsonl";
  write_file(tools,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
             "\"content\": \"Hello\"}]}\n"
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}, {\"role\": \"assistant\", "
             "\"tool_calls\": [{\"id\": \"c1\", \"function\": {\"name\": \"w\", \"arguments\": "
             "\"{not json\"}}]}]}\n");
  expect_one_line_error(run_cli("train " + flags + " --data " + quoted(tools)),
                        {tools.string(), "line 2", "messages[1].tool_calls[0].function.arguments", "not JSON"},
                        "a tool call's arguments that are not JSON");
  EXPECT_FALSE(fs::exists(dir_ / "run" / "metrics.jsonl"));
}

TEST_F(TrainCli, ImpossibleResumesAndOccupiedRunDirectoriesAreRefused) {
  const fs::path run = dir_ / "run";
  expect_one_line_error(run_cli("train --resume --output " + quoted(run)), {"--resume", run.string()},
                        "resume of a missing directory");
  fs::create_directories(run);
  expect_one_line_error(run_cli("train --resume --output " + quoted(run)), {"--resume", "no complete checkpoint"},
                        "resume without a checkpoint");
  expect_one_line_error(run_cli("train --resume"), {"--resume", "--output"}, "resume without --output");

  ASSERT_EQ(run_cli(train("--output " + quoted(run), {{"--max-steps", "2"}})).exit_code, 0);
  const std::string metrics = read_file(run / "metrics.jsonl");
  expect_one_line_error(run_cli(train("--output " + quoted(run))),
                        {run.string(), "already holds checkpoints", "--resume"}, "new run into an occupied directory");
  expect_one_line_error(run_cli(train("--output " + quoted(run) + " --resume", {{"--seq-len", "48"}})),
                        {"--seq-len is 48", "started with 64", "omit --seq-len"}, "resume with another --seq-len");
  expect_one_line_error(run_cli(train("--output " + quoted(run) + " --resume --optimizer adamw8bit")), {"--optimizer"},
                        "resume with another --optimizer");
  EXPECT_EQ(read_file(run / "metrics.jsonl"), metrics);  // nothing was touched
}

// Issue 53 item 3: a new run takes an empty or new directory. One that holds anything else is refused with one line
// naming what is there, and nothing in it changes: a person's file, a step-N copied without its checksums (which the
// run's pruning deleted), step-N.tmp / step-N.deleting it did not make, an earlier run's metrics.jsonl (replaced,
// exit 0). An earlier run that saved no checkpoint is replaced only with --overwrite.
TEST_F(TrainCli, ANewRunTakesOnlyAnEmptyDirectoryAndChangesNothingInAnother) {
  struct Case {
    std::string what;
    std::vector<std::pair<std::string, std::string>> files;  // relative path, contents
    std::vector<std::string> named;                          // what the error names
  };
  const std::vector<Case> cases = {
      {"a person's file", {{"notes.txt", "mine"}}, {"notes.txt", "not empty"}},
      {"a checkpoint copied without its checksums", {{"step-3/model.safetensors", "a copy"}}, {"step-3"}},
      {"an unfinished write it did not make", {{"step-5.tmp/notes.txt", "mine"}}, {"step-5.tmp"}},
      {"a deletion it did not make", {{"step-5.deleting/notes.txt", "mine"}}, {"step-5.deleting"}},
      {"an earlier run's metrics",
       {{"metrics.jsonl", "{\"step\": 1, \"loss\": 2.0}\n"}},
       {"metrics.jsonl", "--overwrite"}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const fs::path run = dir_ / "occupied";
    fs::remove_all(run);
    for (const auto& [file, contents] : c.files) {
      fs::create_directories((run / file).parent_path());
      write_file(run / file, contents);
    }
    const CliResult refused = run_cli(train("--output " + quoted(run)));
    expect_one_line_error(refused, {run.string()}, c.what);
    for (const std::string& part : c.named)
      EXPECT_NE(refused.err.find(part), std::string::npos) << "'" << part << "' not in: " << refused.err;
    for (const auto& [file, contents] : c.files) EXPECT_EQ(read_file(run / file), contents) << file;
    std::vector<std::string> left;  // the lock file included: it goes with the refusal
    for (const auto& entry : fs::recursive_directory_iterator(run))
      if (entry.is_regular_file()) left.push_back(fs::relative(entry.path(), run).string());
    EXPECT_EQ(left.size(), c.files.size()) << "something was added";
  }
  // An earlier run that stopped before its first checkpoint: --overwrite starts over in it.
  const fs::path run = dir_ / "occupied";
  const CliResult again = run_cli(train("--output " + quoted(run) + " --overwrite", {{"--max-steps", "2"}}));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(read_jsonl(run / "metrics.jsonl").size(), 2u);
  // With --overwrite too, a person's file is never taken over.
  fs::create_directories(dir_ / "mine");
  write_file(dir_ / "mine" / "notes.txt", "mine");
  expect_one_line_error(run_cli(train("--output " + quoted(dir_ / "mine") + " --overwrite")), {"notes.txt"},
                        "--overwrite over a person's directory");
  EXPECT_EQ(read_file(dir_ / "mine" / "notes.txt"), "mine");
}

// Issue 53 item 5: with --nonfinite skip a run whose every step was skipped trained nothing; it exited 0 (and
// exported). Now it is an error saying so. A model with a NaN in its final norm makes every loss NaN.
TEST_F(TrainCli, ARunWhoseEveryStepWasSkippedFails) {
  const fs::path model = dir_ / "nan-model";
  fs::copy(tiny_model_dir(), model);
  {
    const std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(model / "model.safetensors");
    const uint64_t offset = file->at("model.norm.weight").offset;
    std::fstream out(model / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(static_cast<std::streamoff>(offset));
    const uint32_t nan = 0x7fc07fc0u;  // a NaN as F32, two as BF16
    out.write(reinterpret_cast<const char*>(&nan), sizeof nan);
  }
  const CliResult result =
      run_cli(train("--output " + quoted(dir_ / "run") + " --nonfinite skip --export " + quoted(dir_ / "export"),
                    {{"--model", quoted(model)}, {"--max-steps", "2"}}));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("every step of this run (2 of 2) was skipped"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir_ / "export"));
}

// --distill-from: the fixture model learns from a teacher fine-tuned from it on the same data (plain training, a BF16
// export), as QAD recovers a quantized model from its base. The header names the teacher and the loss; every metrics
// line carries kl and teacher_agreement, the evaluation eval_kl; the held-out KL to the teacher falls; resuming with
// another teacher is refused (the teacher is part of the run); the distillation flags without a teacher, with the L1
// loss, and a teacher of another vocabulary are one-line errors.
TEST_F(TrainCli, DistillationFromATeacherReportsAndLowersTheKl) {
  const fs::path run = dir_ / "run", tuned = dir_ / "teacher";
  const CliResult tuning = run_cli(train(
      "--output " + quoted(dir_ / "teacher-run") + " --qat off --export " + quoted(tuned) + " --export-format bf16",
      {{"--max-steps", "16"}, {"--lr", "1e-2"}}));
  ASSERT_EQ(tuning.exit_code, 0) << tuning.err;
  const std::string teacher = quoted(tuned);
  const CliResult result = run_cli(train("--output " + quoted(run) + " --distill-from " + teacher +
                                             " --distill-weight 0.9 --distill-temperature 2 --eval-split 0.25 "
                                             "--eval-every 4",
                                         {{"--max-steps", "12"}, {"--lr", "1e-2"}}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("distillation (QAD) from " + tuned.string()), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("0.9 x temperature^2 x KL(teacher || student) at temperature 2 + 0.1 x cross-entropy"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("| kl "), std::string::npos) << result.err;
  const std::vector<json> metrics = read_jsonl(run / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), 12u);
  for (const json& m : metrics) {
    EXPECT_TRUE(m["kl"].is_number()) << m.dump();
    EXPECT_TRUE(m["teacher_agreement"].is_number()) << m.dump();
  }
  // The held-out KL to the teacher (the same samples each time) falls.
  ASSERT_TRUE(metrics[3]["eval_kl"].is_number()) << metrics[3].dump();
  ASSERT_TRUE(metrics[11]["eval_kl"].is_number()) << metrics[11].dump();
  EXPECT_LT(metrics[11]["eval_kl"].get<double>(), metrics[3]["eval_kl"].get<double>());

  // The same teacher through a cache of its top K (distill-cache with the run's data flags): no teacher in memory.
  const fs::path cache = dir_ / "teacher.safetensors";
  // The run's flags but the optimizer's: its data, seed and steps say which samples it visits.
  const std::map<std::string, std::string> run_flags = {{"--max-steps", "8"}, {"--lr", ""}, {"--warmup", ""}};
  const CliResult made = run_cli("distill-cache " + tiny_train_flags(data_, run_flags) + " --distill-from " + teacher +
                                 " --distill-temperature 2 --eval-split 0.25 --top-k 64 --output " + quoted(cache));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(made.err.rfind("nvfp4lm distill-cache: device cpu", 0), 0u) << made.err;
  EXPECT_NE(made.out.find("8 samples"), std::string::npos) << made.out;
  const fs::path cached_run = dir_ / "cached";
  const CliResult cached = run_cli(train("--output " + quoted(cached_run) + " --distill-from " + quoted(cache) +
                                             " --distill-weight 0.9 --distill-temperature 2 --eval-split 0.25 "
                                             "--eval-every 4",
                                         {{"--max-steps", "8"}, {"--lr", "1e-2"}}));
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  EXPECT_NE(cached.err.find("distillation (QAD) from the teacher cache " + cache.string()), std::string::npos)
      << cached.err;
  const std::vector<json> cached_metrics = read_jsonl(cached_run / "metrics.jsonl");
  ASSERT_EQ(cached_metrics.size(), 8u);
  ASSERT_TRUE(cached_metrics[3]["eval_kl"].is_number()) << cached_metrics[3].dump();
  ASSERT_TRUE(cached_metrics[7]["eval_kl"].is_number()) << cached_metrics[7].dump();
  EXPECT_LT(cached_metrics[7]["eval_kl"].get<double>(), cached_metrics[3]["eval_kl"].get<double>());
  expect_one_line_error(run_cli(train("--output " + quoted(dir_ / "r5") + " --distill-from " + quoted(cache))),
                        {"--distill-temperature 2"}, "a cache of another temperature");
  const fs::path more = write_pairs_jsonl(dir_ / "more.jsonl", 12);
  expect_one_line_error(run_cli("train " + tiny_train_flags(more) + " --output " + quoted(dir_ / "r6") +
                                " --distill-from " + quoted(cache) + " --distill-temperature 2"),
                        {"is not in this teacher cache", "distill-cache"}, "a cache of other data");

  expect_one_line_error(run_cli(train("--output " + quoted(run) + " --resume --distill-from " +
                                      quoted(tiny_model_dir()) + " --distill-weight 0.9 --distill-temperature 2")),
                        {"--distill-from"}, "resume with another teacher");
  expect_one_line_error(run_cli(train("--output " + quoted(dir_ / "r2") + " --distill-weight 0.5")),
                        {"--distill-weight", "--distill-from"}, "a weight without a teacher");
  expect_one_line_error(run_cli(train("--output " + quoted(dir_ / "r3") + " --distill-from " + teacher + " --loss l1")),
                        {"--distill-from", "--loss l1"}, "distillation with the L1 loss");
  // The tiny preset has the real Qwen3 vocabulary (151936 tokens), the fixture 512.
  ASSERT_EQ(run_cli("synth --preset tiny " + quoted(dir_ / "other")).exit_code, 0);
  expect_one_line_error(run_cli(train("--output " + quoted(dir_ / "r4") + " --distill-from " + quoted(dir_ / "other"))),
                        {"--distill-from", "vocabulary has 151936 tokens"}, "a teacher of another vocabulary");
}

// The default run directory is named by the second (runs/train-YYYYmmdd-HHMMSS): a run started in the same second
// as another (a script's loop; CI once ran the migration table's two trainings within one) gets its own directory
// with a suffix, never the other run's checkpoints. The next seconds' names are taken beforehand, each by a run with
// a checkpoint, so the new run must start in one of them.
TEST_F(TrainCli, DefaultRunDirectoryOfTheSameSecondIsNotShared) {
  const fs::path cwd = dir_ / "cwd";
  std::set<fs::path> taken;
  const std::time_t now = std::time(nullptr);
  for (int second = 0; second < 30; ++second) {
    std::tm local{};
    const std::time_t at = now + second;
    localtime_r(&at, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
    const fs::path run = cwd / "runs" / (std::string("train-") + stamp);
    fs::create_directories(run / "step-1");
    write_file(run / "step-1" / "trainer_state.json", "{}");
    taken.insert(run);
  }
  const CliResult result = run_cli(train("", {{"--max-steps", "1"}}), "", "", cwd);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<fs::path> fresh;
  for (const auto& entry : fs::directory_iterator(cwd / "runs"))
    if (!taken.count(entry.path())) fresh.push_back(entry.path());
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_TRUE(taken.count(fs::path(fresh[0].string().substr(0, fresh[0].string().size() - 2))))
      << fresh[0] << " is not a taken name with -2";
  EXPECT_TRUE(fs::exists(fresh[0] / "step-1" / "model.safetensors") || fs::exists(fresh[0] / "metrics.jsonl"));
  EXPECT_NE(result.err.find(fresh[0].filename().string()), std::string::npos) << result.err;

  // A run that fails before writing anything leaves no directory of its own behind.
  expect_one_line_error(run_cli(train("", {{"--data", quoted(dir_ / "missing.jsonl")}}), "", "", cwd),
                        {"missing.jsonl"}, "missing data");
  size_t dirs = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(cwd / "runs")) ++dirs;
  EXPECT_EQ(dirs, taken.size() + 1);
}

TEST_F(TrainCli, DeviceCudaWithoutAGpuIsAnErrorNotASilentCpuRun) {
  const std::optional<std::string> no_gpu = no_gpu_environment();
  if (!no_gpu) GTEST_SKIP() << "a GPU is usable here";
  const fs::path run = dir_ / "run";
  expect_one_line_error(run_cli(train("--output " + quoted(run) + " --device cuda"), "", *no_gpu), {"--device cuda"},
                        "--device cuda");
  EXPECT_FALSE(fs::exists(run / "metrics.jsonl"));
  expect_one_line_error(run_cli(train("--output " + quoted(run) + " --device tpu")), {"tpu"}, "--device tpu");
}

}  // namespace
}  // namespace nvfp4lm::test::test_train_cli
