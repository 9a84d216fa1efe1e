// The tool calls in a model's answer, found as the answer streams in (fed chunk by chunk): the Qwen3 / Hermes form
// that the Qwen3 chat templates teach,
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// A block becomes a call when its body is a JSON object whose "name" is one of the request's tools and whose
// "arguments" is an object; any other block (bad JSON, an unknown function, one never closed) stays in the content as
// the model wrote it: a malformed call is text, never an error.
//
// Conventions:
//  - arguments is the JSON text exactly as the model wrote it: the templates print a string `arguments` as it is, so
//    a client that sends the call back (OpenAI's form) renders the very tokens the model produced;
//  - whitespace next to a call is the template's (it writes "\n" between the content and each call), not content:
//    whitespace before a block is held back and dropped when the block is a call, and whitespace after a call up to
//    the next text is dropped;
//  - text that may still become "<tool_call>" (a trailing "<tool", or trailing whitespace) is held back until later
//    text or finish() tells, so nothing is shown that a call later takes back;
//  - the result does not depend on how the text is cut into chunks (the tests feed every split).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace nvfp4lm::serve {

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text of an object, as written
};

// What one feed() or finish() adds: content text (after what earlier calls gave) and calls completed.
struct ToolCallOutput {
  std::string content;
  std::vector<ToolCall> calls;
};

class ToolCallParser {
 public:
  // tool_names: the functions a call may name. max_calls: calls kept (parallel_tool_calls false: 1); later blocks that
  // are valid calls are dropped, neither calls nor content.
  explicit ToolCallParser(std::vector<std::string> tool_names, size_t max_calls = static_cast<size_t>(-1));

  ToolCallOutput feed(std::string_view text);
  // The end of the answer: what was held back, as content (an open block included).
  ToolCallOutput finish();

  size_t calls() const { return calls_; }

 private:
  void emit_text(std::string text, ToolCallOutput& out);
  void close_block(const std::string& body, ToolCallOutput& out);

  std::vector<std::string> tool_names_;
  size_t max_calls_;
  size_t calls_ = 0;         // valid blocks seen (kept or dropped)
  bool in_block_ = false;    // inside <tool_call> ... waiting for </tool_call>
  bool after_call_ = false;  // only whitespace since the last call
  std::string pending_;      // text not decided yet (in a block: the body so far)
  std::string held_space_;   // whitespace just before the open block
};

// The call in a block's body (between <tool_call> and </tool_call>), or false when it is not one: not a JSON object,
// "name" not among tool_names, "arguments" not an object.
bool parse_tool_call_body(std::string_view body, const std::vector<std::string>& tool_names, ToolCall& call);

}  // namespace nvfp4lm::serve
