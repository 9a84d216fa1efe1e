// `nvfp4lm apply-template` prints what transformers' apply_chat_template(tokenize=False) returns: checked against
// Python's jinja2 renderings of published templates (tests/fixtures/tokenizer/chat_template_cases.jsonl, made by
// tests/reference/make_chat_template_fixtures.py), with tools, the generation prompt and template kwargs, from a file
// and from stdin; a template that raises ends in one error line.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "common/test_util.h"

namespace nvfp4lm::test::test_apply_template_cli {
namespace {

using json = nlohmann::ordered_json;

struct Reference {
  json meta;
  std::string text;  // jinja2's rendering
};

Reference jinja2_rendering(const std::string& template_file, const std::string& conversation, bool generation_prompt) {
  std::ifstream in(fixture_path("tokenizer/chat_template_cases.jsonl"), std::ios::binary);
  std::string line;
  std::getline(in, line);
  Reference reference{json::parse(line)["meta"], ""};
  while (std::getline(in, line)) {
    const json row = json::parse(line);
    if (row["template"] == template_file && row["conversation"] == conversation &&
        row["add_generation_prompt"] == generation_prompt) {
      reference.text = row.value("text", "");
      return reference;
    }
  }
  ADD_FAILURE() << "no fixture row for " << template_file << " / " << conversation;
  return reference;
}

TEST(ApplyTemplateCli, PrintsWhatJinja2RendersForPublishedTemplates) {
  const TempDir dir;
  const std::tuple<std::string, std::string, bool> cases[] = {{"Qwen-Qwen3-Instruct-2507.jinja", "agent_loop", true},
                                                              {"Qwen-Qwen3-4B-Thinking-2507.jinja", "reasoning", false},
                                                              {"openai-gpt-oss-120b.jinja", "parallel_calls", true},
                                                              {"moonshotai-Kimi-K2.jinja", "unicode", false}};
  for (const auto& [file, conversation, generation_prompt] : cases) {
    const Reference reference = jinja2_rendering(file, conversation, generation_prompt);
    ASSERT_FALSE(reference.text.empty()) << file;
    const json record = reference.meta["conversations"][conversation];
    const fs::path tools = dir / "tools.json";
    std::string tools_flag;
    if (record.contains("tools")) {  // --tools FILE, the rest as a list of messages
      write_file(tools, record["tools"].dump());
      tools_flag = " --tools " + quoted(tools);
    }
    const fs::path messages = dir / "messages.json";
    write_file(messages, record["messages"].dump());
    // These templates print no special-token variables (the fixture's are placeholders such as "<|bos|>").
    const CliResult result =
        run_cli("apply-template --chat-template " + quoted(fixture_path("chat-templates") / file) + " --messages " +
                    quoted(messages) + tools_flag + (generation_prompt ? " --add-generation-prompt" : "") +
                    " --kwargs " + shell_quoted(reference.meta["kwargs"].dump()),
                "", "SOURCE_DATE_EPOCH=" + reference.meta["source_date_epoch"].get<std::string>());
    ASSERT_EQ(result.exit_code, 0) << file << ": " << result.err;
    EXPECT_EQ(result.out, reference.text) << file << " / " << conversation;
    EXPECT_NE(result.err.find("--chat-template"), std::string::npos) << "names the template: " << result.err;
  }
}

TEST(ApplyTemplateCli, ReadsARequestBodyFromStdinAndCountsTokens) {
  const json body = {{"messages", json::array({{{"role", "user"}, {"content", "Hi there"}}})},
                     {"chat_template_kwargs", {{"enable_thinking", false}}}};
  const CliResult result = run_cli(
      "apply-template --chat-template qwen3-hybrid --messages - --add-generation-prompt --count-tokens", body.dump());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_NE(result.err.find("tokens"), std::string::npos) << result.err;
}

TEST(ApplyTemplateCli, ATemplateThatRaisesIsOneErrorLine) {
  const TempDir dir;
  write_file(dir / "t.jinja",
             "{% for m in messages %}{% if m.role == 'system' %}"
             "{{ raise_exception('System role not supported') }}{% endif %}{% endfor %}");
  write_file(dir / "m.json", R"([{"role": "system", "content": "x"}, {"role": "user", "content": "y"}])");
  expect_one_line_error(
      run_cli("apply-template --chat-template " + quoted(dir / "t.jinja") + " --messages " + quoted(dir / "m.json")),
      {"System role not supported"});
  expect_one_line_error(run_cli("apply-template --messages " + quoted(dir / "missing.json")), {"missing.json"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_apply_template_cli
