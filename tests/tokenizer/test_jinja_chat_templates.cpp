// The Jinja interpreter on the Qwen3 chat templates: every case of chat_template.jsonl (rendered by
// transformers' apply_chat_template; see tests/fixtures/tokenizer/README.md) byte for byte, for the bundled
// hybrid-thinking template and the bundled Instruct-2507 one (tokenizer/bundled_chat_templates.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tokenizer/chat_template.h"
#include "tokenizer/jinja/template.h"
#include "tokenizer_test_util.h"

namespace nvfp4lm::test_jinja_chat_templates {
namespace {

using json = nlohmann::ordered_json;

// The chat_template.jsonl rows (messages keep their key order), without the meta line.
std::vector<json> reference_cases() {
  std::vector<json> rows;
  std::ifstream in(test::fixture_path("tokenizer/chat_template.jsonl"), std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    json row = json::parse(line);
    if (!row.contains("meta")) rows.push_back(std::move(row));
  }
  return rows;
}

// The variables apply_chat_template passes for a case.
json context_of(const json& row) {
  json context = {{"messages", row["messages"]}, {"add_generation_prompt", row["add_generation_prompt"]}};
  if (!row["enable_thinking"].is_null()) context["enable_thinking"] = row["enable_thinking"];
  return context;
}

const jinja::Template& hybrid_template() {
  static const jinja::Template compiled(test::qwen3_tokenizer().chat_template_source());
  return compiled;
}

const jinja::Template& instruct2507_template() {
  static const jinja::Template compiled{std::string(*bundled_chat_template("qwen3-instruct-2507"))};
  return compiled;
}

TEST(JinjaChatTemplates, QwenTemplatesMatchApplyChatTemplate) {
  const std::vector<json> cases = reference_cases();
  ASSERT_GE(cases.size(), 30u);
  for (const json& row : cases) {
    const jinja::Template& compiled = row["template"] == "file" ? hybrid_template() : instruct2507_template();
    EXPECT_EQ(compiled.render(context_of(row)), row["text"].get<std::string>())
        << row["name"] << " / " << row["template"];
  }
}

// Pins the structure the hybrid template writes for tools and tool calls, with arguments serialized by tojson in their
// key order (test_jinja_reference.cpp compares the same against @huggingface/jinja).
TEST(JinjaChatTemplates, HybridTemplateRendersToolsAndToolCalls) {
  const json context = json::parse(R"({
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "units": ["c"]}}}]},
      {"role": "tool", "content": "18C"}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true})");
  const std::string expected =
      "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
      "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\"}}}\n"
      "</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
      "\"units\": [\"c\"]}}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\n";
  EXPECT_EQ(hybrid_template().render(context), expected);
}

}  // namespace
}  // namespace nvfp4lm::test_jinja_chat_templates
