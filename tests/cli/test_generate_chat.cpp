// generate, chat, bench infer and diagnose end to end through the real executable on a tiny random model
// (`synth --preset tiny`, which copies the bundled tokenizer in): exit codes, the header and statistics lines,
// greedy output that is deterministic and equal to a manual greedy loop over the library's forward pass, the chat
// commands under a pipe, and one-line errors for bad flags and for --device cuda without a usable GPU. generate
// --json: the ids decode to the text, logprobs are <= 0 and agree with the top-K list, the top-1 of --logprobs is the
// greedy choice at temperature 0, --prompt-ids gives what the same ids as text give, bad values are exit-2 errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "model/qwen3_model.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::test::test_generate_chat {
namespace {

class CliGenerate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const CliResult synth = run_cli("synth --preset tiny --seed 7 " + quoted(model_path()));
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path model_path() { return *dir_ / "tiny"; }
  static std::string model_flag() { return "--model " + quoted(model_path()); }
  // generate --json's object for `flags` (a failed run is a test failure and an empty object).
  static nlohmann::json run_json(const std::string& flags);

  static TempDir* dir_;
};
TempDir* CliGenerate::dir_ = nullptr;

// The last line of stderr: generate's statistics line.
std::string last_line(const std::string& text) {
  std::string trimmed = text;
  while (!trimmed.empty() && trimmed.back() == '\n') trimmed.pop_back();
  return trimmed.substr(trimmed.rfind('\n') == std::string::npos ? 0 : trimmed.rfind('\n') + 1);
}

TEST_F(CliGenerate, GreedyIsDeterministicAndEqualsAManualLoop) {
  const std::string args = "generate " + model_flag() + " --prompt 'Write a haiku.' --max-tokens 10 --temperature 0";
  const CliResult first = run_cli(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const CliResult second = run_cli(args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(first.out, second.out);

  // First stderr line: device, compute path, precision.
  EXPECT_EQ(first.err.rfind("nvfp4lm generate: device cpu, compute path cpu/dense, precision fp32", 0), 0u)
      << first.err;
  const std::string stats = last_line(first.err);
  for (const char* part : {"prompt ", "generated 10 tokens", "prefill ", "decode ", "tok/s", "peak memory"})
    EXPECT_NE(stats.find(part), std::string::npos) << stats;

  // The same answer from full forward passes of the library model, rendered with the same template.
  const Tokenizer tokenizer = Tokenizer::load(model_path());
  const Qwen3Model model = Qwen3Model::load(model_path());
  const std::vector<ChatMessage> messages = {{"user", "Write a haiku."}};
  std::vector<int32_t> ids = encode_generation_prompt(tokenizer, ChatTemplate::resolve(tokenizer), messages);
  std::vector<int32_t> generated;
  const int64_t vocab = model.config().vocab_size, decodable = static_cast<int64_t>(tokenizer.vocab_size());
  for (int step = 0; step < 10; ++step) {
    const int64_t tokens = static_cast<int64_t>(ids.size());
    const Tensor logits = model.forward(Tensor::from_ints(ids, Shape{1, tokens}));
    const float* last = logits.data<float>() + (tokens - 1) * vocab;
    const int32_t next = static_cast<int32_t>(std::max_element(last, last + decodable) - last);
    ASSERT_NE(next, *tokenizer.token_id("<|im_end|>")) << "the tiny model ended early; pick another seed";
    generated.push_back(next);
    ids.push_back(next);
  }
  EXPECT_EQ(first.out, tokenizer.decode(generated, true) + "\n");
}

TEST_F(CliGenerate, RawPromptSamplingAndStopStrings) {
  const CliResult raw = run_cli(
      "generate " + model_flag() +
      " --raw --prompt 'Once upon a time' --max-tokens 6 --seed 3 --temperature 1.2 "
      "--top-k 0 --top-p 0.95 --min-p 0.01 --repetition-penalty 1.1 --presence-penalty 0.5 --frequency-penalty 0.3");
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_NE(last_line(raw.err).find("prompt 4 tokens"), std::string::npos) << raw.err;  // no template
  const CliResult again = run_cli(
      "generate " + model_flag() +
      " --raw --prompt 'Once upon a time' --max-tokens 6 --seed 3 --temperature 1.2 "
      "--top-k 0 --top-p 0.95 --min-p 0.01 --repetition-penalty 1.1 --presence-penalty 0.5 --frequency-penalty 0.3");
  EXPECT_EQ(raw.out, again.out) << "same seed, same text";

  // A stop string made of the greedy answer's second half: the output is cut before it.
  const CliResult greedy = run_cli("generate " + model_flag() + " --prompt Hi --max-tokens 8 --temperature 0");
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  const std::string text = greedy.out.substr(0, greedy.out.size() - 1);
  ASSERT_GE(text.size(), 4u);
  const std::string stop = text.substr(text.size() / 2);
  const std::string expected = text.substr(0, text.find(stop));
  // Shell-quote the stop string (it may hold quotes).
  std::string quoted_stop = "'";
  for (char c : stop) quoted_stop += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted_stop += "'";
  const CliResult stopped =
      run_cli("generate " + model_flag() + " --prompt Hi --max-tokens 8 --temperature 0 --stop " + quoted_stop);
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_EQ(stopped.out, expected + "\n");
  EXPECT_NE(last_line(stopped.err).find("stop: stop string"), std::string::npos) << stopped.err;
}

TEST_F(CliGenerate, ChatThroughAPipe) {
  const std::string args = "chat " + model_flag() + " --max-tokens 5 --temperature 0";
  const CliResult one = run_cli(args, "Hello\n");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.err.rfind("nvfp4lm chat: device cpu, compute path cpu/dense", 0), 0u) << one.err;
  ASSERT_FALSE(one.out.empty());
  EXPECT_EQ(one.out.find("> "), std::string::npos) << "no prompt marker under a pipe";

  // Two turns keep history (the second answer sees the first); /reset forgets it; /exit stops reading.
  const CliResult two = run_cli(args, "Hello\nHello\n");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out.substr(0, one.out.size()), one.out);
  EXPECT_NE(two.out, one.out + one.out) << "the second turn must see the first";
  EXPECT_NE(two.err.find("cached)"), std::string::npos) << "the second turn reuses the cache: " << two.err;
  const CliResult reset = run_cli(args, "Hello\n/reset\nHello\n/exit\nHello\n");
  ASSERT_EQ(reset.exit_code, 0) << reset.err;
  EXPECT_EQ(reset.out, one.out + one.out);
  EXPECT_NE(reset.err.find("[conversation reset]"), std::string::npos) << reset.err;

  // /system starts a new conversation with a system prompt: the same as --system from the start.
  const CliResult system = run_cli(args, "Hello\n/system You are a pirate.\nHello\n");
  const CliResult flag = run_cli(args + " --system 'You are a pirate.'", "Hello\n");
  ASSERT_EQ(system.exit_code, 0) << system.err;
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_EQ(system.out, one.out + flag.out);
  EXPECT_NE(flag.out, one.out);

  // End of input (Ctrl-D) with no message at all is a clean exit.
  const CliResult empty = run_cli(args, "");
  EXPECT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_EQ(empty.out, "");
}

TEST_F(CliGenerate, CudaWithoutAGpuIsAClearError) {
  const std::optional<std::string> no_gpu = no_gpu_environment();
  if (!no_gpu) GTEST_SKIP() << "a GPU is present";
  for (const std::string& command : {"generate " + model_flag() + " --prompt hi", "chat " + model_flag(),
                                     std::string("bench infer --preset tiny")}) {
    const CliResult result = run_cli(command + " --device cuda", "hi\n", *no_gpu);
    expect_one_line_error(result, {"--device cuda"});
    EXPECT_TRUE(result.err.find("without CUDA") != std::string::npos || result.err.find("no GPU") != std::string::npos)
        << result.err;
    EXPECT_EQ(result.out, "") << "nothing may run on the CPU instead";
  }
}

TEST_F(CliGenerate, BadFlagsAreClearErrors) {
  const std::string generate = "generate " + model_flag() + " --prompt hi ";
  expect_one_line_error(run_cli(generate + "--temperature -1"), {"--temperature"});
  expect_one_line_error(run_cli(generate + "--top-p 1.5"), {"--top-p"});
  expect_one_line_error(run_cli(generate + "--min-p 1"), {"--min-p"});
  expect_one_line_error(run_cli(generate + "--repetition-penalty 0"), {"--repetition-penalty"});
  expect_one_line_error(run_cli(generate + "--presence-penalty 2.5"), {"--presence-penalty"});
  expect_one_line_error(run_cli(generate + "--frequency-penalty -3"), {"--frequency-penalty"});
  expect_one_line_error(run_cli(generate + "--max-tokens 0"), {"--max-tokens"});
  expect_one_line_error(run_cli(generate + "--stop ''"), {"--stop"});
  expect_one_line_error(run_cli(generate + "--device tpu"), {"tpu"});
  expect_one_line_error(run_cli(generate + "--max-memory -2"), {"--max-memory"});
  expect_one_line_error(run_cli(generate + "--max-memory 0.001"), {"limit"});
  expect_one_line_error(run_cli(generate + "--raw --system x"), {"--system"});
  expect_one_line_error(run_cli("generate --model /nonexistent/model --prompt hi"), {"/nonexistent/model"});
  const CliResult missing = run_cli("generate " + model_flag());
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("--prompt"), std::string::npos) << missing.err;
  expect_one_line_error(run_cli("chat " + model_flag() + " --context 1"), {"--context"});
  expect_one_line_error(run_cli("bench infer --preset tiny " + model_flag()), {"--model", "--preset"});
  expect_one_line_error(run_cli("bench infer " + model_flag() + " --nvfp4"), {"--nvfp4"});
  expect_one_line_error(run_cli("bench infer --preset nope"), {"nope"});
}

TEST_F(CliGenerate, ContextGuard) {
  // The same model with a 24-token context (--config overrides config.json).
  nlohmann::json config = nlohmann::json::parse(read_file(model_path() / "config.json"));
  config["max_position_embeddings"] = 24;
  write_file(*dir_ / "short.json", config.dump());
  const std::string args =
      "generate " + model_flag() + " --config " + quoted(*dir_ / "short.json") + " --temperature 0 ";
  // "Hi" in the template takes 9 tokens: 16 new tokens fit, not 100; the cap is announced.
  const CliResult capped = run_cli(args + "--prompt Hi --max-tokens 100");
  ASSERT_EQ(capped.exit_code, 0) << capped.err;
  EXPECT_NE(capped.err.find("capped from 100 to 16"), std::string::npos) << capped.err;
  EXPECT_NE(last_line(capped.err).find("generated 16 tokens"), std::string::npos) << capped.err;
  EXPECT_NE(last_line(capped.err).find("stop: context full"), std::string::npos) << capped.err;
  std::string long_prompt;
  for (int i = 0; i < 30; ++i) long_prompt += " word";
  expect_one_line_error(run_cli(args + "--prompt '" + long_prompt + "'"), {"the prompt has", "24 tokens"});
}

TEST_F(CliGenerate, BenchInferWritesTableAndJson) {
  const fs::path json_path = *dir_ / "bench.json";
  const CliResult result =
      run_cli("bench infer " + model_flag() + " --prompt-len 16 --gen 4 --copy-mib 16 --json " + quoted(json_path));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err.rfind("nvfp4lm bench infer: device cpu, compute path cpu/dense", 0), 0u) << result.err;
  for (const char* part : {"prefill", "decode", "time to first token", "achieved weight bandwidth", "memcpy"})
    EXPECT_NE(result.out.find(part), std::string::npos) << result.out;
  const nlohmann::json json = nlohmann::json::parse(read_file(json_path));
  EXPECT_EQ(json["prompt_tokens"], 16);
  EXPECT_EQ(json["generated_tokens"], 4);
  EXPECT_GT(json["decode_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(json["copy_gb_per_s"].get<double>(), 0);
  EXPECT_EQ(json["compute_path"], "cpu/dense");

  // --preset synthesises (and with --nvfp4 quantizes) a model in a temporary directory.
  const CliResult preset = run_cli("bench infer --preset tiny --nvfp4 --prompt-len 8 --gen 3 --copy-mib 16 --json -");
  ASSERT_EQ(preset.exit_code, 0) << preset.err;
  const nlohmann::json preset_json = nlohmann::json::parse(preset.out);
  EXPECT_EQ(preset_json["compute_path"], "cpu/nvfp4-int8");  // bench infer's default, --cpu-matmul int8
  EXPECT_EQ(preset_json["cpu_matmul"], "int8");
  EXPECT_NE(preset.err.find("weights NVFP4"), std::string::npos) << preset.err;
}

nlohmann::json CliGenerate::run_json(const std::string& flags) {
  const CliResult result = run_cli("generate " + model_flag() + " " + flags);
  EXPECT_EQ(result.exit_code, 0) << flags << ": " << result.err;
  return result.exit_code == 0 ? nlohmann::json::parse(result.out) : nlohmann::json();
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string text;
  for (const int32_t id : ids) {
    if (!text.empty()) text += ',';  // appended piece by piece: GCC 12 warns falsely about "," + std::string
    text += std::to_string(id);
  }
  return text;
}

TEST_F(CliGenerate, GreedyTokensLogprobsAndText) {
  const nlohmann::json out = run_json("--prompt 'Write a haiku.' --max-tokens 6 --temperature 0 --json --logprobs 3");
  ASSERT_TRUE(out.is_object());
  const Tokenizer tokenizer = Tokenizer::load(model_path());
  const std::vector<int32_t> prompt = out["prompt_ids"].get<std::vector<int32_t>>();
  EXPECT_NE(tokenizer.decode(prompt).find("Write a haiku."), std::string::npos) << tokenizer.decode(prompt);
  ASSERT_EQ(out["tokens"].size(), 6u);
  std::vector<int32_t> ids;
  for (const nlohmann::json& token : out["tokens"]) {
    const auto id = token["id"].get<int32_t>();
    ids.push_back(id);
    const int32_t one[1] = {id};
    EXPECT_EQ(token["text"], tokenizer.decode(one));
    EXPECT_EQ(token["bytes"].size(), tokenizer.token_bytes(id).size());
    const double logprob = token["logprob"].get<double>();
    EXPECT_LE(logprob, 0);
    ASSERT_EQ(token["top_logprobs"].size(), 3u);
    const nlohmann::json& top = token["top_logprobs"];
    EXPECT_EQ(top[0]["id"].get<int32_t>(), id) << "greedy: the chosen token is the most likely one";
    EXPECT_DOUBLE_EQ(top[0]["logprob"].get<double>(), logprob);
    EXPECT_GE(top[0]["logprob"].get<double>(), top[1]["logprob"].get<double>());
    EXPECT_GE(top[1]["logprob"].get<double>(), top[2]["logprob"].get<double>());
    EXPECT_LT(std::exp(top[0]["logprob"].get<double>()) + std::exp(top[1]["logprob"].get<double>()), 1.0 + 1e-9);
  }
  EXPECT_EQ(out["text"], tokenizer.decode(ids, true)) << "the ids decode to the text";
  EXPECT_EQ(out["stop_reason"], "max tokens");
  EXPECT_EQ(out["timing"]["generated_tokens"], 6);
  EXPECT_GT(out["timing"]["prefill_seconds"].get<double>(), 0);

  // The same answer as plain generate prints.
  const CliResult plain =
      run_cli("generate " + model_flag() + " --prompt 'Write a haiku.' --max-tokens 6 --temperature 0");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, out["text"].get<std::string>() + "\n");
}

TEST_F(CliGenerate, PromptIdsEqualTheTextPrompt) {
  const nlohmann::json text =
      run_json("--prompt 'Tell me a story.' --max-tokens 5 --temperature 0 --json --logprobs 2");
  ASSERT_TRUE(text.is_object());
  const std::vector<int32_t> prompt = text["prompt_ids"].get<std::vector<int32_t>>();
  const nlohmann::json ids =
      run_json("--prompt-ids " + ids_text(prompt) + " --max-tokens 5 --temperature 0 --json --logprobs 2");
  const nlohmann::json array =
      run_json("--prompt-ids '[" + ids_text(prompt) + "]' --max-tokens 5 --temperature 0 --json");
  ASSERT_TRUE(ids.is_object());
  EXPECT_EQ(ids["prompt_ids"], text["prompt_ids"]);
  EXPECT_EQ(ids["tokens"], text["tokens"]);
  EXPECT_EQ(ids["text"], text["text"]);
  ASSERT_TRUE(array.is_object());
  EXPECT_EQ(array["text"], text["text"]);
  EXPECT_FALSE(array["tokens"][0].contains("top_logprobs")) << "no --logprobs, no alternatives";

  // Sampling reports the model's distribution, not the sampler's: the chosen token's logprob is the same number
  // whatever the temperature.
  const nlohmann::json sampled = run_json("--prompt-ids " + ids_text(prompt) +
                                          " --max-tokens 1 --temperature 0.01 --top-k 1 --seed 3 --json --logprobs 1");
  ASSERT_TRUE(sampled.is_object());
  EXPECT_EQ(sampled["tokens"][0]["id"], text["tokens"][0]["id"]);
  EXPECT_DOUBLE_EQ(sampled["tokens"][0]["logprob"].get<double>(), text["tokens"][0]["logprob"].get<double>());
}

TEST_F(CliGenerate, BadValuesAreUsageErrors) {
  for (const std::string& flags :
       {std::string("--prompt hi --json --logprobs -1"), std::string("--prompt hi --json --logprobs 1001"),
        std::string("--prompt hi --logprobs 2"), std::string("--prompt-ids 1,2,999999"),
        std::string("--prompt-ids 1,,2"), std::string("--prompt-ids 1,x"), std::string("--prompt-ids -4"),
        std::string("--prompt-ids '[]'"), std::string("--prompt hi --prompt-ids 1,2"),
        std::string("--prompt-ids 1,2 --raw"), std::string("--prompt-ids 1,2 --system x"), std::string(""),
        std::string("--prompt hi --max-tokens 0")}) {
    const CliResult result = run_cli("generate " + model_flag() + " " + flags);
    EXPECT_EQ(result.exit_code, 2) << flags << ": " << result.err;
    expect_one_line_error(result, {}, flags);
  }
  expect_one_line_error(run_cli("generate " + model_flag() + " --prompt-ids 1,2,999999"),
                        {"--prompt-ids", "999999", "[0, 151669)"});
  // Issue 53 item 6: an element with line breaks made a 3-line error, and the element was quoted twice.
  const CliResult broken = run_cli("generate " + model_flag() + " --prompt-ids '1,\n2\nx\n,3'");
  expect_one_line_error(broken, {"--prompt-ids: element 2", "\"2\\nx\" is not a whole decimal number"});
  EXPECT_EQ(broken.exit_code, 2) << broken.err;
  const CliResult doubled = run_cli("generate " + model_flag() + " --prompt-ids 1,x");
  EXPECT_NE(doubled.err.find("element 2: 'x' is not a whole decimal number"), std::string::npos) << doubled.err;
}

TEST(CliDiagnose, ReportsComputePaths) {
  const CliResult text = run_cli("diagnose");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.err.rfind("nvfp4lm diagnose: device ", 0), 0u) << text.err;
  for (const char* part : {"build", "cpu", "blas", "gpu", "cpu/dequant-gemm", "cuda/nvfp4-w4a16"})
    EXPECT_NE(text.out.find(part), std::string::npos) << text.out;
  const CliResult json_run = run_cli("diagnose --json");
  ASSERT_EQ(json_run.exit_code, 0) << json_run.err;
  const nlohmann::json json = nlohmann::json::parse(json_run.out);
  EXPECT_EQ(json["build"]["cuda"].get<bool>(), NVFP4LM_HAS_CUDA != 0);
  EXPECT_GT(json["cpu"]["logical_cores"].get<int>(), 0);
  std::map<std::string, nlohmann::json> paths;
  for (const auto& path : json["compute_paths"]) paths[path["name"]] = path;
  ASSERT_TRUE(paths.count("cpu/dequant-gemm"));
  EXPECT_TRUE(paths["cpu/dequant-gemm"]["available"].get<bool>());
  ASSERT_TRUE(paths.count("cuda/nvfp4-w4a16"));
  if (!cuda_available()) {
    EXPECT_FALSE(paths["cuda/nvfp4-w4a16"]["available"].get<bool>());
    const std::string why = paths["cuda/nvfp4-w4a16"]["detail"];
    EXPECT_TRUE(why.find("not built with CUDA") != std::string::npos || why.find("no GPU") != std::string::npos) << why;
  }
}

// NVFP4LM_CPU_ISA runs the CPU kernels as a smaller CPU would, and says so wherever the kernels are named; a value
// that is no level is an error naming the accepted ones, never ignored.
TEST(CliDiagnose, CpuIsaLimitCapsTheKernelVariantsAndSaysSo) {
  const CliResult scalar = run_cli("diagnose", "", "NVFP4LM_CPU_ISA=scalar");
  ASSERT_EQ(scalar.exit_code, 0) << scalar.err;
  // The compute paths' lines name the kernel variants (the cpu line above them names the CPU's features).
  const std::string paths = scalar.out.substr(scalar.out.find("compute paths"));
  EXPECT_NE(paths.find("capped by NVFP4LM_CPU_ISA=scalar"), std::string::npos) << paths;
  EXPECT_NE(paths.find("scalar kernel"), std::string::npos) << paths;
  // The levels are the build's architecture's (ops/cpu/cpu_features.h): x86-64's or AArch64's.
#if defined(__aarch64__)
  const std::initializer_list<const char*> wider_kernels = {"neon", "sdot", "smmla", "bfmmla"};
  const char* levels = "scalar, neon, dotprod or native";
#else
  const std::initializer_list<const char*> wider_kernels = {"avx2", "avx512"};
  const char* levels = "scalar, avx2, avx512f or native";
#endif
  for (const char* wider : wider_kernels) EXPECT_EQ(paths.find(wider), std::string::npos) << paths;
  const CliResult native = run_cli("diagnose", "", "NVFP4LM_CPU_ISA=native");
  ASSERT_EQ(native.exit_code, 0) << native.err;
  EXPECT_EQ(native.out.find("capped"), std::string::npos) << native.out;
  expect_one_line_error(run_cli("diagnose", "", "NVFP4LM_CPU_ISA=sse9"), {"NVFP4LM_CPU_ISA='sse9'", levels});
}

}  // namespace
}  // namespace nvfp4lm::test::test_generate_chat
