// `generate --device cuda`, `train --device cuda`, `eval --device cuda` and `quantize --calibrate --device cuda` end to
// end through the real executable on `synth --preset tiny`, against the same commands on the CPU: the greedy tokens
// agree and every training step's loss follows the CPU's within BF16 tolerance (CUDA keeps activations in BF16). On the
// emulated CUDA device (NVFP4LM_CUDA=EMULATE) this is the whole CUDA backend, kernels, cuBLASLt, CUDA graph decode and
// the GPU training step, run in CI; with a GPU it is the same check on the hardware.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/test_util.h"
#include "io/modelopt.h"
#include "io/safetensors_reader.h"
#include "serve/serve_test_util.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test::test_cli_cuda {
namespace {

using json = nlohmann::json;

class CliCuda : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const CliResult synth = run_cli("synth --preset tiny --seed 3 " + quoted(model_path()));
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
    std::string data;
    const char* pairs[][2] = {{"Who are you?", "I am a tiny model."},
                              {"What is 2 plus 2?", "2 plus 2 is 4."},
                              {"Name a colour.", "Blue."},
                              {"Say hello.", "Hello!"}};
    for (const auto& [question, answer] : pairs)
      data +=
          json{{"messages", {{{"role", "user"}, {"content", question}}, {{"role", "assistant"}, {"content", answer}}}}}
              .dump() +
          "\n";
    write_file(data_path(), data);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path model_path() { return *dir_ / "tiny"; }
  static fs::path data_path() { return *dir_ / "chats.jsonl"; }

  static TempDir* dir_;
};
TempDir* CliCuda::dir_ = nullptr;

// `diagnose` names Blackwell's FP4 tensor-core path: available where the GPU is SM 12.x with an sm_120a / sm_121a
// image (the emulated device presenting a GB10, NVFP4LM_EMU_ARCH=sm_121), and on an sm_90 the reason it is not.
TEST_F(CliCuda, DiagnoseNamesTheFp4TensorCorePathAndWhyItIsMissing) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  auto w4a4_path = [](const std::string& environment) {
    const CliResult run = run_cli("diagnose --json", "", environment);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const json report = json::parse(run.out);
    for (const auto& path : report["compute_paths"])
      if (path["name"] == "cuda/nvfp4-mma-fp4") return path;
    ADD_FAILURE() << "no cuda/nvfp4-mma-fp4 in " << run.out;
    return json{};
  };
#if !NVFP4LM_CUDA_EMULATION
  GTEST_SKIP() << "the emulated device's architecture setting is what this test varies";
#endif
  const json hopper = w4a4_path("NVFP4LM_EMU_ARCH=sm_90");
  EXPECT_FALSE(hopper.value("available", true));
  EXPECT_NE(hopper.value("detail", "").find("not Blackwell SM 12.x"), std::string::npos) << hopper.dump();
  const json gb10 = w4a4_path("NVFP4LM_EMU_ARCH=sm_121");
  EXPECT_TRUE(gb10.value("available", false)) << gb10.dump();
  EXPECT_NE(gb10.value("detail", "").find("block-scaled FP4 mma.sync"), std::string::npos) << gb10.dump();
  const CliResult text = run_cli("diagnose", "", "NVFP4LM_EMU_ARCH=sm_121");
  EXPECT_NE(text.out.find("sm_121 on the CPU"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("unified memory (the host's"), std::string::npos) << text.out;  // a GB10 is integrated
}

// On a GPU whose memory is the host's (the emulated GB10), training's memory report gives the CPU's and the GPU's
// tensors' joint peak, which is what --max-memory limits there (the limit itself: tests/core/test_tensor.cpp,
// Memory.AGpuWhoseMemoryIsTheHostsSharesItsLimitWithTheCpu); a discrete GPU's report has no such line.
TEST_F(CliCuda, OnAGb10TheMemoryReportCountsHostAndGpuTogether) {
  NVFP4LM_SKIP_WITHOUT_GPU();
#if !NVFP4LM_CUDA_EMULATION
  GTEST_SKIP() << "the emulated device presents the GB10 here";
#endif
  const std::string train = "train --model " + quoted(model_path()) + " --data " + quoted(data_path()) +
                            " --device cuda --max-steps 1 --seed 1 --output ";
  const CliResult gb10 = run_cli(train + quoted(*dir_ / "run-gb10"), "", "NVFP4LM_EMU_ARCH=sm_121");
  ASSERT_EQ(gb10.exit_code, 0) << gb10.err;
  EXPECT_NE(gb10.err.find("unified memory (the GPU's memory is the host's): CPU and GPU tensors peak"),
            std::string::npos)
      << gb10.err;
  const CliResult hopper = run_cli(train + quoted(*dir_ / "run-h100"), "", "NVFP4LM_EMU_ARCH=sm_90");
  ASSERT_EQ(hopper.exit_code, 0) << hopper.err;
  EXPECT_EQ(hopper.err.find("unified memory"), std::string::npos) << hopper.err;
}

// `serve --device cuda` (decode steps as CUDA graphs per batch bucket) and `generate --prompts --device cuda` answer
// exactly as `generate --device cuda` answers alone, for several requests at once.
TEST_F(CliCuda, ServeAndPromptFileAnswerAsGenerateAlone) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const std::vector<std::string> questions = {"Tell me a story.", "Who are you?", "Name a colour."};
  std::vector<GeneratedAnswer> alone;
  std::string lines;
  for (const std::string& question : questions) {
    alone.push_back(run_generate("--model " + quoted(model_path()) + " --device cuda --temperature 0 --max-tokens 6 " +
                                 "--prompt " + shell_quoted(question)));
    lines += json{{"prompt", question}}.dump() + "\n";
  }
  write_file(*dir_ / "prompts.jsonl", lines);
  const CliResult batch = run_cli("generate --model " + quoted(model_path()) + " --device cuda --temperature 0 " +
                                  "--max-tokens 6 --prompts " + quoted(*dir_ / "prompts.jsonl") + " --out " +
                                  quoted(*dir_ / "answers.jsonl") + " --overwrite");
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  std::istringstream answers(read_file(*dir_ / "answers.jsonl"));
  std::string line;
  for (size_t i = 0; std::getline(answers, line); ++i) EXPECT_EQ(json::parse(line)["text"], alone[i].text) << i;

  ServeProcess server({"--model", model_path().string(), "--device", "cuda", "--max-batch", "4", "--context", "64"});
  const int port = server.port();
  ASSERT_GT(port, 0) << server.log();
  EXPECT_NE(server.log().find("CUDA graphs per batch bucket"), std::string::npos) << server.log();
  std::vector<std::thread> clients;
  std::vector<std::string> texts(questions.size());
  for (size_t i = 0; i < questions.size(); ++i)
    clients.emplace_back([&, i] {
      serve::HttpClient client("127.0.0.1", port, /*timeout_s=*/300);
      const json body = {
          {"messages", {{{"role", "user"}, {"content", questions[i]}}}}, {"max_tokens", 6}, {"temperature", 0}};
      const HttpResult result = post_json(client, "/v1/chat/completions", body.dump());
      texts[i] = result.status == 200 ? result.json()["choices"][0]["message"]["content"].get<std::string>()
                                      : "HTTP " + std::to_string(result.status) + ": " + result.body;
    });
  for (std::thread& client : clients) client.join();
  for (size_t i = 0; i < questions.size(); ++i) EXPECT_EQ(texts[i], alone[i].text) << questions[i];
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(60), 0) << server.log();
}

TEST_F(CliCuda, GenerateGivesTheCpuGreedyTokens) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const std::string args =
      "generate --model " + quoted(model_path()) + " --prompt 'Tell me a story.' --max-tokens 12 --temperature 0";
  const CliResult cpu = run_cli(args + " --device cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  for (const char* graph : {"on", "off"}) {
    const CliResult gpu = run_cli(args + " --device cuda --cuda-graph " + graph);
    ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
    EXPECT_EQ(gpu.err.rfind("nvfp4lm generate: device cuda:0", 0), 0u) << gpu.err;
    if (cuda_is_emulated()) {
      EXPECT_NE(gpu.err.find("(emulated on the CPU)"), std::string::npos) << gpu.err;
    }
    EXPECT_EQ(gpu.out, cpu.out) << "--cuda-graph " << graph;
  }
  // --deterministic (batch-invariant kernels) names itself in the header and the log, and answers the same.
  const CliResult invariant = run_cli(args + " --device cuda --deterministic");
  ASSERT_EQ(invariant.exit_code, 0) << invariant.err;
  EXPECT_NE(invariant.err.find("compute path cuda/dense-bf16+batch-invariant"), std::string::npos) << invariant.err;
  EXPECT_NE(invariant.err.find("--deterministic: batch-invariant CUDA kernels"), std::string::npos) << invariant.err;
  EXPECT_EQ(invariant.out, cpu.out);
  const CliResult on_cpu = run_cli(args + " --device cpu --deterministic");
  ASSERT_EQ(on_cpu.exit_code, 0) << on_cpu.err;
  EXPECT_NE(on_cpu.err.find("the CPU's kernels are batch-invariant already"), std::string::npos) << on_cpu.err;
  EXPECT_EQ(on_cpu.out, cpu.out);
}

// The predecessor's guard flags (core/memory_guard.h) on generate and train: a limit above what the command takes is
// logged and changes nothing; one below it stops the command with one line naming the reading and the limit; the CPU
// has no GPU memory to guard.
TEST_F(CliCuda, TheGuardFlagsStopWhatGoesOverTheLimit) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const std::string generate =
      "generate --model " + quoted(model_path()) + " --prompt 'Tell me a story.' --max-tokens 4 --temperature 0";
  const CliResult plain = run_cli(generate + " --device cuda");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const CliResult guarded = run_cli(generate + " --device cuda --gpu-limit-gb 100 --gpu-poll-secs 0.05");
  ASSERT_EQ(guarded.exit_code, 0) << guarded.err;
  EXPECT_NE(guarded.err.find("memory guard: cuda:0"), std::string::npos) << guarded.err;
  EXPECT_NE(guarded.err.find("in use as the driver reports it, limit --gpu-limit-gb 100 GiB"), std::string::npos)
      << guarded.err;
  EXPECT_EQ(guarded.out, plain.out);
  expect_one_line_error(run_cli(generate + " --device cuda --gpu-limit-gb 0.001"),
                        {"memory guard: cuda:0", "in use (driver)", "over --gpu-limit-gb 0.001", "raise the limit"});
  const std::string train = "train --model " + quoted(model_path()) + " --data " + quoted(data_path()) +
                            " --max-steps 1 --seed 1 --output " + quoted(*dir_ / "guarded-run");
  expect_one_line_error(run_cli(train + " --device cuda --gpu-limit-gb 0.001"),
                        {"memory guard: cuda:0", "over --gpu-limit-gb 0.001"});
  EXPECT_FALSE(fs::exists(*dir_ / "guarded-run"));
  expect_one_line_error(run_cli(train + " --device cpu --gpu-limit-gb 1"), {"--gpu-limit-gb", "--device cpu"});
}

TEST_F(CliCuda, TrainingLossesFollowTheCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  std::vector<std::vector<double>> losses;
  for (const char* device : {"cpu", "cuda"}) {
    const fs::path run = *dir_ / (std::string("run-") + device);
    const CliResult result =
        run_cli("train --model " + quoted(model_path()) + " --data " + quoted(data_path()) + " --output " +
                quoted(run) + " --device " + device + " --max-steps 5 --lr 1e-3 --seed 1");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    if (std::strcmp(device, "cuda") == 0) {
      // The path the header names is one `diagnose` reports available (it once called it unavailable).
      EXPECT_NE(result.err.find("compute path cuda/dequant-gemm"), std::string::npos) << result.err;
      const CliResult diagnose = run_cli("diagnose --json");
      ASSERT_EQ(diagnose.exit_code, 0) << diagnose.err;
      bool listed = false;
      const json report = json::parse(diagnose.out);
      for (const json& path : report["compute_paths"]) {
        if (path["name"] != "cuda/dequant-gemm") continue;
        listed = true;
        EXPECT_TRUE(path["available"].get<bool>()) << path.dump();
      }
      EXPECT_TRUE(listed) << diagnose.out;
    }
    std::vector<double>& curve = losses.emplace_back();
    for (const json& record : read_jsonl(run / "metrics.jsonl")) curve.push_back(record["loss"].get<double>());
    ASSERT_EQ(curve.size(), 5u) << device;
  }
  for (size_t step = 0; step < losses[0].size(); ++step) {
    const double cpu = losses[0][step], gpu = losses[1][step];
    EXPECT_LT(std::abs(gpu - cpu), 1e-2 * std::abs(cpu)) << "step " << step + 1 << ": cpu " << cpu << ", cuda " << gpu;
  }
  EXPECT_LT(losses[1].back(), losses[1].front()) << "training on the GPU must lower the loss";
}

// `eval --device cuda` (the dense BF16 path, and the NVFP4 W4A16 path of a ModelOpt export with the BF16 model as
// --reference) and `quantize --calibrate --device cuda` against the same commands on the CPU, within BF16 tolerance.
TEST_F(CliCuda, EvalAndCalibrationFollowTheCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const fs::path nvfp4 = *dir_ / "tiny-nvfp4";
  const CliResult quantized = run_cli("quantize " + quoted(model_path()) + " " + quoted(nvfp4) + " --format modelopt");
  ASSERT_EQ(quantized.exit_code, 0) << quantized.err;
  std::vector<json> results;
  for (const char* device : {"cpu", "cuda"}) {
    for (const fs::path& model : {model_path(), nvfp4}) {
      const CliResult result = run_cli("eval --model " + quoted(model) + " --data " + quoted(data_path()) +
                                       " --reference " + quoted(model_path()) + " --json --device " + device);
      ASSERT_EQ(result.exit_code, 0) << result.err;
      EXPECT_EQ(result.err.rfind(std::string("nvfp4lm eval: device ") + device, 0), 0u) << result.err;
      results.push_back(json::parse(result.out));
    }
  }
  for (size_t i = 0; i < 2; ++i) {
    const json &cpu = results[i], &gpu = results[i + 2];
    EXPECT_EQ(gpu["tokens"], cpu["tokens"]);
    EXPECT_LT(std::abs(gpu["loss"].get<double>() - cpu["loss"].get<double>()), 1e-2 * cpu["loss"].get<double>())
        << cpu.dump() << "\n"
        << gpu.dump();
  }
  EXPECT_EQ(results[0]["reference"]["kl_mean"].get<double>(), 0.0);  // the model against itself, on the CPU
  EXPECT_EQ(results[2]["reference"]["kl_mean"].get<double>(), 0.0);  // and on CUDA: the same logits twice
  EXPECT_GT(results[3]["reference"]["kl_mean"].get<double>(), 0.0);

  write_file(*dir_ / "calib.txt", "Some calibration text, long enough for a few dozen tokens of activations.");
  std::vector<json> scales;
  for (const char* device : {"cpu", "cuda"}) {
    const fs::path out = *dir_ / (std::string("calibrated-") + device);
    const CliResult result =
        run_cli("quantize " + quoted(model_path()) + " " + quoted(out) + " --format modelopt --calibrate " +
                quoted(*dir_ / "calib.txt") + " --device " + device);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.err.find(std::string("nvfp4lm quantize --calibrate: device ") + device), std::string::npos)
        << result.err;
    EXPECT_EQ(json::parse(read_file(out / "hf_quant_config.json"))["nvfp4lm"]["input_scale"], "calibrated");
    const SafetensorsSet set = SafetensorsSet::open_dir(out);
    json& values = scales.emplace_back();
    for (const char* name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.o_proj.weight",
                             "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight"}) {
      const auto at = set.at(modelopt_names(name).input_scale);
      float value;
      std::memcpy(&value, at.file->bytes_of(*at.entry), sizeof(float));
      values[name] = value;
    }
  }
  for (const auto& [name, cpu] : scales[0].items()) {
    const double gpu = scales[1][name].get<double>();
    EXPECT_LT(std::abs(gpu - cpu.get<double>()), 2e-2 * cpu.get<double>())
        << name << ": cpu " << cpu << ", cuda " << gpu;
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_cli_cuda
