// llama.cpp runs nvfp4lm's GGUF export (label "slow": the first run installs node-llama-cpp's prebuilt CPU binaries
// from npm through bench/llamacpp_reference.sh, ~85 MB; later runs reuse them). Two tiny models (the qwen3-tiny fixture
// with the tiny tokenizer, and synth --preset tiny with the bundled Qwen3 tokenizer) are quantized to NVFP4 (ModelOpt)
// and written as GGUF NVFP4 from those very weights (quantize copies them bit for bit); llama.cpp's greedy tokens from
// fixed prompt ids must equal `nvfp4lm generate --temperature 0 --prompt-ids` on the NVFP4 model. Skips (with the
// reason) where npm cannot reach its registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace nvfp4lm::test::slow_gguf_llamacpp {
namespace {

struct Shell {
  int exit_code = -1;
  std::string out;
};

Shell shell(const std::string& command) {
  Shell result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t got = 0;
  while ((got = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, got);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The JSON object on the last line of `text`.
nlohmann::json last_json_line(const std::string& text) {
  std::string trimmed = text;
  while (!trimmed.empty() && trimmed.back() == '\n') trimmed.pop_back();
  const size_t start = trimmed.rfind('\n');
  return nlohmann::json::parse(start == std::string::npos ? trimmed : trimmed.substr(start + 1));
}

// Greedy tokens of `nvfp4lm generate` on the NVFP4 model directory and of llama.cpp on its GGUF export, per prompt.
// Returns how many prompts' continuations were not one repeated token.
int expect_same_greedy_tokens(const std::string& script, const fs::path& nvfp4, const std::string& tokenizer_flag,
                              const fs::path& gguf, const std::vector<std::string>& prompts) {
  int varied = 0;
  for (const std::string& ids : prompts) {
    const CliResult ours = run_cli("generate --model " + quoted(nvfp4) + tokenizer_flag + " --prompt-ids " + ids +
                                   " --temperature 0 --max-tokens 12 --json");
    EXPECT_EQ(ours.exit_code, 0) << ours.err;
    if (ours.exit_code != 0) return varied;
    std::vector<int64_t> expected;
    const nlohmann::json generated = nlohmann::json::parse(ours.out);  // named: a range-for over a member of a
    for (const auto& token : generated["tokens"]) expected.push_back(token["id"].get<int64_t>());  // temporary dangles
    EXPECT_FALSE(expected.empty()) << ours.out;  // fewer than 12 when an end-of-sequence token came first
    if (expected.empty()) return varied;

    const Shell theirs = shell(script + " run " + quoted(gguf) + " --prompt-ids " + ids + " --gen 12 --threads 2");
    EXPECT_EQ(theirs.exit_code, 0) << theirs.out;
    if (theirs.exit_code != 0) return varied;
    const nlohmann::json result = last_json_line(theirs.out);
    std::vector<int64_t> got = result["tokens"].get<std::vector<int64_t>>();
    EXPECT_GE(got.size(), expected.size()) << theirs.out;
    got.resize(expected.size());  // llama.cpp does not stop at the end-of-sequence token here
    EXPECT_EQ(got, expected) << gguf.filename().string() << " prompt " << ids << "\nllama.cpp: " << theirs.out;
    varied += std::any_of(expected.begin(), expected.end(), [&](int64_t id) { return id != expected.front(); });
  }
  return varied;
}

TEST(GgufLlamaCpp, GreedyTokensEqualNvfp4lmGenerateOnTheNvfp4Export) {
  const std::string script = quoted(source_path("bench/llamacpp_reference.sh"));
  const Shell install = shell(script + " install");
  if (install.exit_code == 3) GTEST_SKIP() << "llama.cpp not available: " << install.out;
  ASSERT_EQ(install.exit_code, 0) << install.out;
  TempDir dir;

  // The fixture model (untied lm_head, random weights, 512-token vocabulary): its continuations vary, so equal tokens
  // say the NVFP4 layers compute the same thing in both.
  const fs::path fixture_nvfp4 = dir / "fixture-nvfp4", fixture_gguf = dir / "fixture-nvfp4.gguf";
  const std::string tokenizer = quoted(fixture_path("tiny-tokenizer"));
  for (const std::string& args :
       {"quantize " + quoted(fixture_path("qwen3-tiny")) + " " + quoted(fixture_nvfp4) + " --format modelopt",
        "quantize " + quoted(fixture_nvfp4) + " " + quoted(fixture_gguf) + " --format gguf --tokenizer " + tokenizer}) {
    const CliResult result = run_cli(args);
    ASSERT_EQ(result.exit_code, 0) << args << "\n" << result.err;
  }
  const int varied = expect_same_greedy_tokens(script, fixture_nvfp4, " --tokenizer " + tokenizer, fixture_gguf,
                                               {"5,17,300,42,7", "100,200,300"});
  EXPECT_EQ(varied, 2) << "the comparison should see the model, not a constant";

  // synth --preset tiny with the bundled Qwen3 tokenizer (151,936 tokens, tied embedding): llama.cpp loads the full
  // tokenizer metadata. Random tied weights make it repeat a token, so this one checks loading and the tokens only.
  const fs::path hf = dir / "tiny", nvfp4 = dir / "tiny-nvfp4", gguf = dir / "tiny-nvfp4.gguf";
  for (const std::string& args : {"synth --preset tiny --seed 3 " + quoted(hf),
                                  "quantize " + quoted(hf) + " " + quoted(nvfp4) + " --format modelopt",
                                  "quantize " + quoted(nvfp4) + " " + quoted(gguf) + " --format gguf"}) {
    const CliResult result = run_cli(args);
    ASSERT_EQ(result.exit_code, 0) << args << "\n" << result.err;
  }
  // "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n"
  expect_same_greedy_tokens(script, nvfp4, "", gguf,
                            {"151644,872,198,7985,264,6386,38242,911,279,9396,13,151645,198,151644,77091,198"});
}

}  // namespace
}  // namespace nvfp4lm::test::slow_gguf_llamacpp
