// Which ChatML rendering a run uses — ONE rule for training data and for generation, so a model is asked
// questions in exactly the form it was trained on:
//   the template the tokenizer's tokenizer_config.json declares (detect_chat_template on its "chat_template"),
//   unless the user names one with --chat-template.
// Generation with the hybrid-thinking template uses enable_thinking = false for answers without a think block:
// the prompt then ends with the empty "<think>\n\n</think>\n\n" block, which is exactly how training data renders
// the final assistant turn (tokenizer/chat.h), so the trained answer is what follows the prompt.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

// --chat-template values: "auto" (nullopt: the tokenizer's own), "instruct-2507", "hybrid-thinking".
// Error listing them otherwise.
std::optional<ChatTemplate> parse_chat_template_flag(std::string_view name);
std::string_view chat_template_flag_name(std::optional<ChatTemplate> choice);  // "auto", ...
std::string_view chat_template_name(ChatTemplate style);                       // "instruct-2507", "hybrid-thinking"

// The rule above.
ChatTemplate resolve_chat_template(const Tokenizer& tokenizer, std::optional<ChatTemplate> requested);

// Token ids of a generation prompt for `messages` (ending with a user turn) that matches how training data with the
// same style renders the assistant's answer (enable_thinking = false, see above).
std::vector<int32_t> encode_generation_prompt(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                              ChatTemplate style);

}  // namespace nvfp4lm
