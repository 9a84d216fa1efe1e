// One message of a conversation, as the OpenAI API, Hugging Face datasets and chat templates write it, and the one
// reader of such messages from JSON (training data, `generate --prompts`, `serve`), so every entry point accepts
// the same messages and rejects the same mistakes with the same words.
//
// A message is a role, its text and whatever else it carries; chat templates receive all of it (as
// apply_chat_template passes the message dicts through):
//   role               system, user, assistant or tool ("developer", the newer OpenAI name, is read as system)
//   content            a string, or a list of {"type": "text", "text": ...} parts (joined, as vLLM's "string"
//                      content format does: the Qwen3 templates call string methods on it); may be null or absent
//                      only for an assistant message that calls tools; read as "", and shown to templates as sent
//   reasoning_content  an assistant's reasoning (thinking models), a string or null
//   tool_calls         an assistant's calls, non-empty: [{"id"?: string, "type"?: "function", "function": {"name":
//                      string, "arguments": JSON text of an object, or an object}}]; ids unique among the calls
//                      not yet answered
//   tool_call_id, name strings (a tool result's call id and function name); a tool message answers a call of an
//                      earlier assistant message that no other tool message answered: the one its tool_call_id
//                      names, or, for calls without ids (transformers' documented form), the first unanswered one
//                      (whose function name its "name" repeats when given)
// A message breaking these rules (OpenAI's API's, with transformers' id-less form) would be trained as written
// (`{"arguments": {not json}`): it is an error naming the key.
// Any other key is passed to the template unchanged, null values too (`message.x is defined` is then true, as under
// transformers, whose templates see the message dicts as given).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace nvfp4lm {

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role_, std::string content_,
              nlohmann::ordered_json fields_ = nlohmann::ordered_json::object())
      : role(std::move(role_)), content(std::move(content_)), fields(std::move(fields_)) {}

  std::string role;     // "system", "user", "assistant" or "tool"
  std::string content;  // the text ("" for none, the parts joined)
  // How the content was sent: a chat template sees a null or absent one as such, as under transformers
  // (DeepSeek-R1's renders tool calls only when content is none); text and text parts reach it as `content` (joined).
  enum class Sent { Text, Null, Absent };
  Sent content_sent = Sent::Text;
  // The message's other keys (reasoning_content, tool_calls, tool_call_id, name, ...), an object.
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();

  bool has_tool_calls() const;
  bool has_reasoning() const;  // a non-empty reasoning_content, or a "</think>" in an assistant's content
  // {"role", "content", ...fields}: what a chat template sees.
  nlohmann::ordered_json to_json() const;
};

// What read_chat_messages and check_chat_tools throw: the message names the key at fault by its JSON path
// ("messages[1].tool_calls[0].function.name"), after `place` ("data.jsonl line 3: ") when one is given; path() is
// that JSON path (serve reports it as the error's param).
class ChatMessageError : public Error {
 public:
  ChatMessageError(const std::string& message, std::string path) : Error(message), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Whether read_chat_messages checks that each tool message answers an earlier call (training data, generate's
// prompts, serve: always), or reads the conversation as written (a chat template's rendering of any sequence of
// messages, as the reference fixtures made with apply_chat_template hold them).
enum class ToolTurns { MustAnswerCalls, AsWritten };

// `messages` (a non-empty JSON list of messages as described above) read; ChatMessageError otherwise.
std::vector<ChatMessage> read_chat_messages(const nlohmann::ordered_json& messages, std::string_view place = {},
                                            ToolTurns tool_turns = ToolTurns::MustAnswerCalls);

// `tools` of a request or record checked: a list of {"type": "function", "function": {"name": string,
// "description"?: string, "parameters"?: object}} (OpenAI form); ChatMessageError (path "tools[i]...") otherwise.
void check_chat_tools(const nlohmann::ordered_json& tools, std::string_view place = {});

}  // namespace nvfp4lm
