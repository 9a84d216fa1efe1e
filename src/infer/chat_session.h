// A conversation with a model: the message history, rendered with the model's ChatML template
// (tokenizer/chat.h) for every turn, and the KV cache reused across turns. Each turn encodes the whole
// conversation (system, earlier turns, the new user message, the generation prompt), keeps the longest prefix
// of those ids that the cache already holds, and runs only the rest — with the Instruct template the previous
// turns are a prefix of the next rendering, so a turn costs its new tokens only. When they are not (the hybrid
// thinking template drops old think blocks, or an answer re-encodes differently) the common prefix is simply
// shorter; the result is always the same as running the whole rendering from an empty cache.
//
// The assistant message recorded in the history is the text that was shown (without the EOS token or a stop
// string). A turn that fails (e.g. the context is full) leaves the history as it was.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "infer/generator.h"
#include "tokenizer/chat.h"

namespace nvfp4lm {

struct ChatSessionOptions {
  GenerationOptions generation;
  std::optional<ChatTemplate> chat_template;  // none: the tokenizer's own (ChatTemplate::resolve)
  std::optional<bool> enable_thinking;        // passed to the template when set (--no-think: false)
  std::string system_prompt;                  // empty: no system message
};

class ChatSession {
 public:
  ChatSession(CachedLm& lm, Tokenizer tokenizer, ChatSessionOptions options);

  // One turn: adds the user message, generates and records the answer.
  GenerationResult reply(const std::string& user_text, const TextCallback& on_text = {});

  // Forgets the conversation (the system prompt stays).
  void reset();
  // Sets (empty: removes) the system prompt and starts a new conversation.
  void set_system(std::string text);

  const std::vector<ChatMessage>& messages() const { return messages_; }  // system message first, when set
  // Ids of the conversation so far plus the generation prompt for `user_text`, as the next turn would run them.
  std::vector<int32_t> prompt_ids(const std::string& user_text) const;
  Generator& generator() { return generator_; }

 private:
  Generator generator_;
  ChatTemplate chat_template_;
  std::optional<bool> enable_thinking_;
  std::vector<ChatMessage> messages_;
};

// A line typed into `nvfp4lm chat`.
struct ChatInput {
  enum class Kind { Message, Reset, System, Exit, Help, Unknown, Empty };
  Kind kind = Kind::Empty;
  std::string text;  // the message, the system prompt, or the unknown command
};
// "/reset", "/system TEXT", "/exit" (or "/quit"), "/help"; any other line starting with '/' is Unknown (write
// "//text" to send a message starting with '/'); blank lines are Empty. A trailing '\r' is dropped.
ChatInput parse_chat_input(std::string_view line);

}  // namespace nvfp4lm
