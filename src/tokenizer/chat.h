// ChatML chat rendering for Qwen3 models, and the token ids + training mask of a conversation.
//
// Two renderings, both exactly as the Jinja chat templates of the Qwen3 files produce them for messages
// with string content and no tools (checked against transformers' apply_chat_template by
// tests/tokenizer/test_chat.cpp with fixtures from tests/reference/make_tokenizer_fixtures.py):
//
//  - ChatTemplate::Instruct2507 (the default; Qwen3-*-Instruct-2507): an optional first system message,
//    then every message as "<|im_start|>{role}\n{content}<|im_end|>\n"; the generation prompt is
//    "<|im_start|>assistant\n"; no think block.
//  - ChatTemplate::HybridThinking (the original Qwen3 template, e.g. the bundled tokenizer_config.json):
//    the same, except that assistant messages after the last user query are rendered with a think block,
//    "<|im_start|>assistant\n<think>\n{reasoning}\n</think>\n\n{answer}" for the final message (reasoning
//    is taken from a "<think>...</think>" prefix of the content and is empty otherwise), and
//    enable_thinking=false appends "<think>\n\n</think>\n\n" to the generation prompt.
//
// Roles: "system", "user", "assistant", "tool" (tool results are wrapped in <tool_response> inside a user
// turn, as the templates do); any other role is an Error. Message text is inserted verbatim: special
// tokens written inside content become control tokens when encoded, exactly as with HF.
//
// Training mask (encode_chat): 1 for the tokens of each assistant message's content and its closing
// <|im_end|> (and, for HybridThinking, the think block, which is part of what the model generates); 0 for
// system/user/tool turns, the "<|im_start|>assistant\n" header and the "\n" after <|im_end|>. A token that
// straddles the header and the content (e.g. "\n\n" when the content starts with "\n") is trained. The ids
// are always exactly tokenizer.encode(render_chat(...)).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
};

enum class ChatTemplate { Instruct2507, HybridThinking };

struct ChatOptions {
  bool add_generation_prompt = false;  // end with "<|im_start|>assistant\n" (for generation)
  ChatTemplate style = ChatTemplate::Instruct2507;
  bool enable_thinking = true;            // HybridThinking only; see above
  bool train_all_assistant_turns = true;  // false: only the last assistant message is trained
};

// The rendering a tokenizer_config.json "chat_template" text asks for: HybridThinking when it handles
// reasoning_content / <think>, otherwise Instruct2507 (also for an empty template).
ChatTemplate detect_chat_template(std::string_view jinja_template);

std::string render_chat(std::span<const ChatMessage> messages, const ChatOptions& options = {});
std::string render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt);

struct EncodedChat {
  std::vector<int32_t> ids;
  std::vector<uint8_t> train_mask;  // same length as ids; 1 = compute the loss on predicting this token
};
EncodedChat encode_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                        const ChatOptions& options = {});

}  // namespace nvfp4lm
