// `generate --prompts FILE.jsonl --out FILE.jsonl`: every line answered through the batch engine (3 at a time here,
// so lines join as others finish) exactly as `generate --prompt` answers it alone, greedy and sampled (line i with
// seed --seed + i), with ids, per-line max_tokens and messages; usage errors exit 2, bad lines are one-line errors
// naming the line.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/test_util.h"

namespace nvfp4lm::test::test_generate_prompts {
namespace {

using nlohmann::json;

std::string model_flag() { return "--model " + quoted(synth_tiny_model(3)); }

std::vector<json> read_lines(const fs::path& path) {
  std::vector<json> lines;
  std::istringstream text(read_file(path));
  for (std::string line; std::getline(text, line);) lines.push_back(json::parse(line));
  return lines;
}

TEST(GeneratePrompts, EveryLineEqualsGenerateAlone) {
  TempDir dir;
  const std::vector<std::string> prompts = {"Hello", "What is 2 + 2?", "Name a colour.", "Once upon a time",
                                            "Translate 'cat' to French."};
  std::string input;
  for (size_t i = 0; i < prompts.size(); ++i) {
    json line = {{"prompt", prompts[i]}, {"id", fmt::format("q{}", i)}};
    if (i == 1) line["max_tokens"] = 3;
    input += line.dump() + "\n";
  }
  input += "\n";  // blank lines are skipped
  write_file(dir / "in.jsonl", input);
  for (const std::string sampling : {"--temperature 0", "--temperature 0.9 --seed 40"}) {
    const CliResult result =
        run_cli("generate " + model_flag() + " --prompts " + quoted(dir / "in.jsonl") + " --out " +
                quoted(dir / "out.jsonl") + " --overwrite --max-batch 3 --max-tokens 7 " + sampling);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.err.find("nvfp4lm generate: device cpu"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("5 answers"), std::string::npos) << result.err;
    const std::vector<json> lines = read_lines(dir / "out.jsonl");
    ASSERT_EQ(lines.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(lines[i]["index"], i);
      EXPECT_EQ(lines[i]["id"], fmt::format("q{}", i));
      std::string flags = "--prompt " + shell_quoted(prompts[i]) + " --max-tokens " + (i == 1 ? "3" : "7") + " ";
      if (sampling == "--temperature 0") {
        flags += sampling;
      } else {
        flags += "--temperature 0.9 --seed " + std::to_string(40 + i);
      }
      const GeneratedAnswer alone = run_generate(model_flag() + " " + flags);
      EXPECT_EQ(lines[i]["text"], alone.text) << sampling << ", line " << i;
      EXPECT_EQ(lines[i]["tokens"].size(), static_cast<size_t>(alone.tokens)) << sampling << ", line " << i;
    }
  }
}

TEST(GeneratePrompts, BadUseAndBadLinesAreOneLineErrors) {
  TempDir dir;
  write_file(dir / "in.jsonl", "{\"prompt\": \"Hi\"}\n");
  const std::string in = " --prompts " + quoted(dir / "in.jsonl");
  const std::string out = " --out " + quoted(dir / "out.jsonl");
  CliResult result = run_cli("generate " + model_flag() + in);
  expect_one_line_error(result, {"--prompts needs --out"});
  EXPECT_EQ(result.exit_code, 2);
  result = run_cli("generate " + model_flag() + in + out + " --prompt Hi");
  expect_one_line_error(result, {"either --prompt", "or --prompts, not both"});
  EXPECT_EQ(result.exit_code, 2);
  result = run_cli("generate " + model_flag());
  expect_one_line_error(result, {"give --prompt TEXT or --prompt-ids IDS, or --prompts FILE.jsonl"});
  EXPECT_EQ(result.exit_code, 2);
  write_file(dir / "bad.jsonl", "{\"prompt\": \"Hi\"}\n{\"prompt\": 5}\n");
  expect_one_line_error(run_cli("generate " + model_flag() + " --prompts " + quoted(dir / "bad.jsonl") + out),
                        {"bad.jsonl line 2", "\"prompt\" must be a string"});
  write_file(dir / "broken.jsonl", "{\"prompt\": \n");
  expect_one_line_error(run_cli("generate " + model_flag() + " --prompts " + quoted(dir / "broken.jsonl") + out),
                        {"broken.jsonl line 1", "not valid JSON"});
  EXPECT_FALSE(fs::exists(dir / "out.jsonl"));
  // max_tokens is bounded like --max-tokens: 2^63 - 1 overflowed the context sum (issue 33), 2^64 - 1 wrapped to -1.
  for (const char* huge : {"9223372036854775807", "18446744073709551615", "16777217", "0", "2.5"}) {
    write_file(dir / "huge.jsonl",
               std::string("{\"prompt\": \"Hi\"}\n{\"prompt\": \"Hi\", \"max_tokens\": ") + huge + "}\n");
    expect_one_line_error(run_cli("generate " + model_flag() + " --prompts " + quoted(dir / "huge.jsonl") + out),
                          {"huge.jsonl line 2", "\"max_tokens\" must be an integer from 1 to 16777216"}, huge);
  }
  EXPECT_FALSE(fs::exists(dir / "out.jsonl"));
  // messages work; an existing --out needs --overwrite.
  write_file(dir / "chat.jsonl", R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})"
                                 "\n");
  ASSERT_EQ(run_cli("generate " + model_flag() + " --prompts " + quoted(dir / "chat.jsonl") + out).exit_code, 0);
  expect_one_line_error(run_cli("generate " + model_flag() + " --prompts " + quoted(dir / "chat.jsonl") + out),
                        {"--overwrite"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_generate_prompts
