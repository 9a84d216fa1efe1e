// See chat_session.h.
#include "infer/chat_session.h"

#include <algorithm>

#include "core/error.h"

namespace nvfp4lm {

ChatSession::ChatSession(CachedLm& lm, Tokenizer tokenizer, ChatSessionOptions options)
    : generator_(lm, std::move(tokenizer), std::move(options.generation)),
      chat_template_(options.chat_template ? std::move(*options.chat_template)
                                           : ChatTemplate::resolve(generator_.tokenizer())),
      enable_thinking_(options.enable_thinking) {
  set_system(std::move(options.system_prompt));
}

void ChatSession::reset() {
  const bool has_system = !messages_.empty() && messages_.front().role == "system";
  messages_.resize(has_system ? 1 : 0);
}

void ChatSession::set_system(std::string text) {
  messages_.clear();
  if (!text.empty()) messages_.push_back({"system", std::move(text)});
}

std::vector<int32_t> ChatSession::prompt_ids(const std::string& user_text) const {
  std::vector<ChatMessage> turn = messages_;
  turn.push_back({"user", user_text});
  return encode_generation_prompt(generator_.tokenizer(), chat_template_, turn, enable_thinking_);
}

GenerationResult ChatSession::reply(const std::string& user_text, const TextCallback& on_text) {
  const std::vector<int32_t> ids = prompt_ids(user_text);
  CachedLm& lm = generator_.lm();
  const std::vector<int32_t>& cached = lm.tokens();
  size_t common =
      static_cast<size_t>(std::mismatch(cached.begin(), cached.end(), ids.begin(), ids.end()).first - cached.begin());
  // At least one token must run to get the logits of the last position.
  common = std::min(common, ids.size() - 1);
  lm.truncate(static_cast<int64_t>(common));
  GenerationResult result = generator_.generate(std::span<const int32_t>(ids).subspan(common), on_text);
  messages_.push_back({"user", user_text});
  messages_.push_back({"assistant", result.text});
  return result;
}

ChatInput parse_chat_input(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  ChatInput input;
  if (line.find_first_not_of(" \t") == std::string_view::npos) return input;  // Empty
  if (line.starts_with("//")) {
    input.kind = ChatInput::Kind::Message;
    input.text = std::string(line.substr(1));
    return input;
  }
  if (!line.starts_with('/')) {
    input.kind = ChatInput::Kind::Message;
    input.text = std::string(line);
    return input;
  }
  const size_t space = line.find(' ');
  const std::string_view command = line.substr(0, space);
  std::string_view argument = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  if (command == "/reset" && argument.empty()) {
    input.kind = ChatInput::Kind::Reset;
  } else if (command == "/system") {
    input.kind = ChatInput::Kind::System;
    input.text = std::string(argument);
  } else if ((command == "/exit" || command == "/quit") && argument.empty()) {
    input.kind = ChatInput::Kind::Exit;
  } else if (command == "/help" && argument.empty()) {
    input.kind = ChatInput::Kind::Help;
  } else {
    input.kind = ChatInput::Kind::Unknown;
    input.text = std::string(line);
  }
  return input;
}

}  // namespace nvfp4lm
