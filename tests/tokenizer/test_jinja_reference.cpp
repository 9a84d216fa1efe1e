// The Jinja interpreter against @huggingface/jinja (npm; installed on demand into <build>/npm-jinja, skipped only
// when npm or its registry is unavailable): the bundled Qwen3 templates (Instruct-2507, Thinking-2507, the original
// hybrid) and Llama-3.1-, Mistral- and ChatML-with-macro-style templates over the conversations of
// tests/fixtures/tokenizer/jinja_conversations.json (system/user/assistant/tool turns, tool calls with nested JSON
// arguments, reasoning_content, <think> in content, multi-turn, unicode), with and without the generation prompt, tools
// and enable_thinking, compared byte for byte.
//
// Only whole chat templates are compared: on some constructs @huggingface/jinja differs from Python's Jinja2 (which
// transformers runs, and which this interpreter follows): {{ [1, 'a'] }} prints JSON there ([1, "a"]), None prints
// as "" and True as "true", and -7 % 3 is -1. The Qwen3 templates use none of these.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "common/test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja/template.h"
#include "tokenizer_test_util.h"

namespace nvfp4lm::test::test_jinja_reference {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kJinjaPackage = "@huggingface/jinja@0.5.11";

// <build>/npm-jinja with @huggingface/jinja in it; an empty path (and the reason) when npm cannot provide it.
fs::path reference_dir(std::string& skip_reason) {
  return installed_npm_package("npm-jinja", kJinjaPackage,
                               fs::path("node_modules") / "@huggingface" / "jinja" / "package.json", skip_reason);
}

struct TemplateUnderTest {
  std::string source;
  json special_tokens;  // bos_token / eos_token, as apply_chat_template passes them
};

// The bundled Qwen3 templates (the hybrid one is the bundled tokenizer's own) and three other families' templates
// (tests/fixtures/tokenizer/other_chat_templates.json).
std::vector<TemplateUnderTest> templates() {
  std::vector<TemplateUnderTest> all;
  const json qwen_special = {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}};
  for (const std::string_view name : bundled_chat_template_names())
    all.push_back({std::string(*bundled_chat_template(name)), qwen_special});
  const json others = json::parse(read_file(fixture_path("tokenizer/other_chat_templates.json")));
  for (const json& other : others["templates"]) all.push_back({other["source"], other["special_tokens"]});
  return all;
}

// Every (template, context) pair of the corpus: 6 templates x 8 conversations x generation prompt x 5 option sets.
std::vector<json> corpus() {
  const json fixture = json::parse(read_file(fixture_path("tokenizer/jinja_conversations.json")));
  const json option_sets = json::array({json::object(),
                                        {{"enable_thinking", false}},
                                        {{"enable_thinking", true}},
                                        {{"tools", fixture["tools"]}},
                                        {{"tools", fixture["tools"]}, {"enable_thinking", false}}});
  std::vector<json> rows;
  for (const TemplateUnderTest& under_test : templates()) {
    for (const json& messages : fixture["conversations"]) {
      for (const bool add_generation_prompt : {false, true}) {
        for (const json& options : option_sets) {
          json context = {{"messages", messages}, {"add_generation_prompt", add_generation_prompt}};
          for (const auto& [key, value] : options.items()) context[key] = value;
          for (const auto& [key, value] : under_test.special_tokens.items()) context[key] = value;
          rows.push_back({{"template", under_test.source}, {"context", std::move(context)}});
        }
      }
    }
  }
  return rows;
}

// A case matches when both render the same text, or both refuse it (a template's raise_exception, e.g. Mistral's
// role alternation, or Llama's single tool call); refusals must be a minority.
TEST(JinjaReference, ChatTemplates480CasesMatchHuggingFaceJinja) {
  std::string skip_reason;
  const fs::path npm_dir = reference_dir(skip_reason);
  if (npm_dir.empty() && !skip_reason.empty()) GTEST_SKIP() << skip_reason;
  ASSERT_FALSE(npm_dir.empty());
  fs::copy_file(source_path("tests/tokenizer/jinja_reference.mjs"), npm_dir / "jinja_reference.mjs",
                fs::copy_options::overwrite_existing);

  const std::vector<json> rows = corpus();
  ASSERT_EQ(rows.size(), 480u) << "the test name states the case count; update both";
  const fs::path input = npm_dir / "corpus.jsonl", output = npm_dir / "rendered.jsonl";
  {
    std::ofstream out(input, std::ios::binary);
    for (const json& row : rows) out << row.dump() << "\n";
  }
  const int status = std::system(("cd " + quoted(npm_dir) + " && timeout 120 node jinja_reference.mjs <" +
                                  quoted(input) + " >" + quoted(output) + " 2>&1")
                                     .c_str());
  ASSERT_EQ(status, 0) << read_file(output);

  std::ifstream reference(output, std::ios::binary);
  std::string line;
  size_t index = 0, matching = 0, refused = 0;
  for (; index < rows.size() && std::getline(reference, line); ++index) {
    const json expected = json::parse(line);
    const json& row = rows[index];
    std::string ours, our_error;
    try {
      ours = jinja::Template(row["template"].get<std::string>()).render(row["context"]);
    } catch (const Error& e) {
      our_error = e.what();
    }
    if (expected.contains("error")) {
      EXPECT_FALSE(our_error.empty()) << "case " << index << ": @huggingface/jinja refused (" << expected["error"]
                                      << ") but we rendered " << ours << "\ncontext " << row["context"].dump();
      matching += !our_error.empty();
      refused += !our_error.empty();
      continue;
    }
    EXPECT_TRUE(our_error.empty()) << "case " << index << ": " << our_error << "\ncontext " << row["context"].dump();
    EXPECT_EQ(ours, expected["text"].get<std::string>()) << "case " << index << ", context " << row["context"].dump();
    matching += our_error.empty() && ours == expected["text"].get<std::string>();
  }
  EXPECT_EQ(index, rows.size()) << "the reference renderer stopped early";
  EXPECT_EQ(matching, rows.size());
  EXPECT_LT(refused, rows.size() / 4) << "most cases must render";
}

}  // namespace
}  // namespace nvfp4lm::test::test_jinja_reference
