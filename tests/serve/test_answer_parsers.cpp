// The incremental answer parsers of serve: tool calls (serve/tool_call_parser.h) and reasoning
// (serve/reasoning_parser.h). Each case is fed whole, then cut at every byte boundary into two chunks and into
// single bytes; every way must give the same content, calls and reasoning.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/reasoning_parser.h"
#include "serve/tool_call_parser.h"

namespace nvfp4lm::serve::test_answer_parsers {
namespace {

struct ToolResult {
  std::string content;
  std::vector<std::string> calls;  // "name arguments"
  bool operator==(const ToolResult&) const = default;
};

void add(ToolResult& result, const ToolCallOutput& out) {
  result.content += out.content;
  for (const ToolCall& call : out.calls) result.calls.push_back(call.name + " " + call.arguments);
}

ToolResult parse_tools(const std::vector<std::string>& chunks, size_t max_calls = static_cast<size_t>(-1)) {
  ToolCallParser parser({"get_weather", "now"}, max_calls);
  ToolResult result;
  for (const std::string& chunk : chunks) add(result, parser.feed(chunk));
  add(result, parser.finish());
  return result;
}

// Every split of `text`: whole, two pieces at each byte, single bytes.
std::vector<std::vector<std::string>> splits(const std::string& text) {
  std::vector<std::vector<std::string>> all = {{text}};
  for (size_t cut = 0; cut <= text.size(); ++cut) all.push_back({text.substr(0, cut), text.substr(cut)});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  all.push_back(bytes);
  return all;
}

void expect_tools(const std::string& text, const ToolResult& expected, size_t max_calls = static_cast<size_t>(-1)) {
  for (const auto& chunks : splits(text)) {
    const ToolResult got = parse_tools(chunks, max_calls);
    EXPECT_EQ(got.content, expected.content) << "text " << text << " first chunk " << chunks.front();
    EXPECT_EQ(got.calls, expected.calls) << "text " << text << " first chunk " << chunks.front();
  }
}

const std::string kCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

TEST(ToolCallParser, PlainTextPassesThrough) {
  expect_tools("Hello, world. 1 < 2 and <tool is not a call.", {"Hello, world. 1 < 2 and <tool is not a call.", {}});
  expect_tools("ends with a partial tag <tool_c", {"ends with a partial tag <tool_c", {}});
  expect_tools("trailing space stays  \n", {"trailing space stays  \n", {}});
}

TEST(ToolCallParser, ACallAloneHasNoContent) { expect_tools(kCall, {"", {"get_weather {\"city\": \"Paris\"}"}}); }

TEST(ToolCallParser, ContentBeforeCallsAndSpaceBetweenThem) {
  const std::string two =
      "Let me check.\n" + kCall + "\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n";
  expect_tools(two, {"Let me check.", {"get_weather {\"city\": \"Paris\"}", "now {}"}});
  // parallel_tool_calls false: the second call is dropped, not shown.
  expect_tools(two, {"Let me check.", {"get_weather {\"city\": \"Paris\"}"}}, 1);
  expect_tools(kCall + "\n\nDone.", {"Done.", {"get_weather {\"city\": \"Paris\"}"}});
}

TEST(ToolCallParser, ArgumentsKeepTheModelsText) {
  expect_tools("<tool_call>\n{\"arguments\":{\"b\":[1, {\"c\":\"}\"}],\"a\":2.50}, \"name\":\"now\"}\n</tool_call>",
               {"", {"now {\"b\":[1, {\"c\":\"}\"}],\"a\":2.50}"}});
}

TEST(ToolCallParser, MalformedBlocksStayContent) {
  const std::vector<std::string> bad = {
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>",  // bad JSON
      "<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>",                // unknown function
      "<tool_call>\n{\"name\": \"now\", \"arguments\": \"{}\"}\n</tool_call>",               // arguments not an object
      "<tool_call>\n[1, 2]\n</tool_call>",
      "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}",  // never closed
  };
  for (const std::string& block : bad) {
    expect_tools(block, {block, {}});
    expect_tools("Text\n" + block + " after", {"Text\n" + block + " after", {}});
  }
  expect_tools(kCall + "\n" + bad[1], {bad[1], {"get_weather {\"city\": \"Paris\"}"}});
}

struct ReasoningResult {
  std::string reasoning, content;
};

ReasoningResult parse_reasoning(const std::vector<std::string>& chunks, bool starts_inside) {
  ReasoningParser parser(starts_inside);
  ReasoningResult result;
  for (const std::string& chunk : chunks) {
    const ReasoningOutput out = parser.feed(chunk);
    result.reasoning += out.reasoning;
    result.content += out.content;
  }
  const ReasoningOutput out = parser.finish();
  result.reasoning += out.reasoning;
  result.content += out.content;
  return result;
}

void expect_reasoning(const std::string& text, bool starts_inside, const std::string& reasoning,
                      const std::string& content) {
  for (const auto& chunks : splits(text)) {
    const ReasoningResult got = parse_reasoning(chunks, starts_inside);
    EXPECT_EQ(got.reasoning, reasoning) << "text " << text << " first chunk " << chunks.front();
    EXPECT_EQ(got.content, content) << "text " << text << " first chunk " << chunks.front();
  }
}

TEST(ReasoningParser, AnswerThatOpensTheThinkBlock) {
  expect_reasoning("<think>\nFirst, 2+2.\nIt is 4.\n</think>\n\nFour.", false, "First, 2+2.\nIt is 4.", "Four.");
  expect_reasoning("<think>\n\n</think>\n\nFour.", false, "", "Four.");
  expect_reasoning("No think block <think>x</think>", false, "", "No think block <think>x</think>");
  expect_reasoning("<thin", false, "", "<thin");
  expect_reasoning("\n<think>x</think>y", false, "", "\n<think>x</think>y");
}

TEST(ReasoningParser, PromptThatOpensTheThinkBlock) {
  expect_reasoning("Hmm, 2+2 < 5.\n</think>\n\nFour.\n", true, "Hmm, 2+2 < 5.", "Four.\n");
  expect_reasoning("Cut short by max_tokens\n\n</thi", true, "Cut short by max_tokens\n\n</thi", "");
  expect_reasoning("Cut short\n\n", true, "Cut short", "");
  expect_reasoning("</think>" + kCall, true, "", kCall);
}

}  // namespace
}  // namespace nvfp4lm::serve::test_answer_parsers
