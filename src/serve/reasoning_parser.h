// A thinking model's answer split into its reasoning (the think block) and its content, as the answer streams in
// (fed chunk by chunk). Used for chat templates that handle reasoning (they mention reasoning_content or <think>):
//  - when the template's generation prompt opens the think block (ChatTemplate::prompt_opens_think(), e.g.
//    Qwen3-Thinking-2507), the answer starts inside the reasoning, which ends at "</think>";
//  - otherwise an answer that starts with "<think>" has its reasoning up to "</think>"; any other answer is all
//    content (e.g. Qwen3 with enable_thinking false, whose prompt carries an empty think block).
// The reasoning loses the newlines at its ends and the content its leading newlines, as the templates strip them
// when the message comes back (reasoning_content.strip('\n'), content.lstrip('\n')). An answer that ends inside the
// think block (max_tokens) is all reasoning. Text that may still turn out to be "<think>" / "</think>" (or trailing
// newlines of the reasoning) is held back until later text or finish() tells; the result does not depend on how the
// text is cut into chunks (the tests feed every split).
#pragma once

#include <string>
#include <string_view>

namespace nvfp4lm::serve {

// What one feed() or finish() adds.
struct ReasoningOutput {
  std::string reasoning;
  std::string content;
};

class ReasoningParser {
 public:
  // starts_inside: the prompt opened the think block.
  explicit ReasoningParser(bool starts_inside);

  ReasoningOutput feed(std::string_view text);
  ReasoningOutput finish();

 private:
  enum class State { Start, Reasoning, AfterReasoning, Content };

  State state_;
  bool reasoning_started_ = false;  // a non-newline byte of reasoning was seen (leading newlines are dropped)
  std::string pending_;
};

}  // namespace nvfp4lm::serve
