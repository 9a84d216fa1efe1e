// See chat_template_choice.h.
#include "tokenizer/chat_template_choice.h"

#include "core/error.h"

namespace nvfp4lm {

std::optional<ChatTemplate> parse_chat_template_flag(std::string_view name) {
  if (name == "auto") return std::nullopt;
  for (ChatTemplate style : {ChatTemplate::Instruct2507, ChatTemplate::HybridThinking})
    if (name == chat_template_name(style)) return style;
  NVFP4LM_FAIL("unknown chat template '{}' (choose auto, instruct-2507 or hybrid-thinking)", name);
}

std::string_view chat_template_name(ChatTemplate style) {
  return style == ChatTemplate::Instruct2507 ? "instruct-2507" : "hybrid-thinking";
}

std::string_view chat_template_flag_name(std::optional<ChatTemplate> choice) {
  return choice ? chat_template_name(*choice) : "auto";
}

ChatTemplate resolve_chat_template(const Tokenizer& tokenizer, std::optional<ChatTemplate> requested) {
  return requested ? *requested : detect_chat_template(tokenizer.chat_template_source());
}

std::vector<int32_t> encode_generation_prompt(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                              ChatTemplate style) {
  ChatOptions options;
  options.add_generation_prompt = true;
  options.style = style;
  options.enable_thinking = false;
  return tokenizer.encode(render_chat(messages, options));
}

}  // namespace nvfp4lm
