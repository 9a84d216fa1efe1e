// See chat_message.h.
#include "tokenizer/chat_message.h"

#include <fmt/format.h>

#include "core/json_text.h"
#include "core/text_excerpt.h"

namespace nvfp4lm {
namespace {

using ordered_json = nlohmann::ordered_json;
using ordered_json = nlohmann::ordered_json;

[[noreturn]] void fail(std::string_view place, const std::string& path, const std::string& what) {
  throw ChatMessageError(place.empty() ? fmt::format("{} {}", path, what) : fmt::format("{}: {} {}", place, path, what),
                         path);
}

const char* kind(const ordered_json& value) { return value.type_name(); }

// content: a string, a list of text parts (joined), or null / absent when `optional`.
std::string read_content(const ordered_json& message, std::string_view place, const std::string& path, bool optional) {
  const auto it = message.find("content");
  if (it == message.end() || it->is_null()) {
    if (optional) return {};
    fail(place, path + ".content", "is missing: every message but an assistant's tool call needs text");
  }
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array())
    fail(place, path + ".content", fmt::format("is {}, expected a string or a list of text parts", kind(*it)));
  std::string text;
  for (size_t i = 0; i < it->size(); ++i) {
    const ordered_json& part = (*it)[i];
    const bool text_part = part.is_object() && part.value("type", ordered_json()).is_string() &&
                           part["type"] == "text" && part.contains("text") && part["text"].is_string();
    if (!text_part) {
      const std::string type = part.is_object() && part.contains("type") ? json_excerpt(part["type"], 40) : "untyped";
      fail(place, fmt::format("{}.content[{}]", path, i),
           fmt::format("is a {} part: only {{\"type\": \"text\", \"text\": ...}} parts are read (this model "
                       "reads text only)",
                       type));
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

void check_string(const ordered_json& object, const char* key, std::string_view place, const std::string& path,
                  bool nullable) {
  const auto it = object.find(key);
  if (it == object.end() || (nullable && it->is_null())) return;
  if (!it->is_string()) fail(place, path + "." + key, fmt::format("is {}, expected a string", kind(*it)));
}

// object["function"], an object with a non-empty string "name" (a tool call's or a tool's); `keys` says what it holds.
const ordered_json& named_function(const ordered_json& object, std::string_view place, const std::string& at,
                                   const char* keys) {
  const auto function = object.find("function");
  if (function == object.end() || !function->is_object())
    fail(place, at + ".function", fmt::format("is missing or not an object with {}", keys));
  const auto name = function->find("name");
  if (name == function->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
    fail(place, at + ".function.name", "is missing or not a non-empty string");
  return *function;
}

void check_tool_calls(const ordered_json& calls, std::string_view place, const std::string& path) {
  if (!calls.is_array()) fail(place, path, fmt::format("is {}, expected a list of tool calls", kind(calls)));
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", path, i);
    const ordered_json& call = calls[i];
    if (!call.is_object())
      fail(place, at, fmt::format("is {}, expected {{\"function\": {{\"name\", \"arguments\"}}}}", kind(call)));
    check_string(call, "id", place, at, false);
    if (call.contains("type") && call["type"] != "function")
      fail(place, at + ".type", fmt::format("is {}, expected \"function\"", json_excerpt(call["type"], 40)));
    const ordered_json& function = named_function(call, place, at, "\"name\" and \"arguments\"");
    const auto arguments = function.find("arguments");
    if (arguments != function.end() && !arguments->is_string() && !arguments->is_object())
      fail(place, at + ".function.arguments", fmt::format("is {}, expected JSON text or an object", kind(*arguments)));
  }
}

}  // namespace

bool ChatMessage::has_tool_calls() const {
  const auto it = fields.find("tool_calls");
  return it != fields.end() && it->is_array() && !it->empty();
}

bool ChatMessage::has_reasoning() const {
  const auto it = fields.find("reasoning_content");
  if (it != fields.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) return true;
  return role == "assistant" && content.find("</think>") != std::string::npos;
}

ordered_json ChatMessage::to_json() const {
  ordered_json message = {{"role", role}, {"content", content}};
  for (const auto& [key, value] : fields.items()) message[key] = value;
  return message;
}

std::vector<ChatMessage> read_chat_messages(const ordered_json& messages, std::string_view place) {
  if (!messages.is_array() || messages.empty())
    fail(place, "messages",
         fmt::format("is {}, expected a non-empty list of {{\"role\", \"content\"}} objects",
                     messages.is_array() ? "an empty list" : kind(messages)));
  std::vector<ChatMessage> result;
  result.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const ordered_json& message = messages[i];
    const std::string path = fmt::format("messages[{}]", i);
    if (!message.is_object())
      fail(place, path, fmt::format("is {}, expected an object with \"role\" and \"content\"", kind(message)));
    const auto role = message.find("role");
    if (role == message.end()) fail(place, path + ".role", "is missing: use system, user, assistant or tool");
    if (!role->is_string())
      fail(place, path + ".role",
           fmt::format("is {}, expected a string: system, user, assistant or tool", kind(*role)));
    ChatMessage parsed;
    parsed.role = role->get<std::string>();
    if (parsed.role == "developer") parsed.role = "system";  // the newer API's name for the system role
    if (parsed.role != "system" && parsed.role != "user" && parsed.role != "assistant" && parsed.role != "tool")
      fail(place, path + ".role",
           fmt::format("is {}: use system, user, assistant or tool (developer is read as system)",
                       quoted_excerpt(parsed.role, 40)));
    parsed.content = read_content(message, place, path, parsed.role == "assistant");
    check_string(message, "reasoning_content", place, path, true);
    check_string(message, "tool_call_id", place, path, false);
    check_string(message, "name", place, path, false);
    if (message.contains("tool_calls") && !message["tool_calls"].is_null()) {
      if (parsed.role != "assistant") fail(place, path + ".tool_calls", "is only allowed on an assistant message");
      check_tool_calls(message["tool_calls"], place, path + ".tool_calls");
    }
    for (const auto& [key, value] : message.items()) {
      if (key == "role" || key == "content" || value.is_null()) continue;
      parsed.fields[key] = value;
    }
    result.push_back(std::move(parsed));
  }
  return result;
}

void check_chat_tools(const ordered_json& tools, std::string_view place) {
  if (!tools.is_array()) fail(place, "tools", fmt::format("is {}, expected a list of functions", kind(tools)));
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = fmt::format("tools[{}]", i);
    const ordered_json& tool = tools[i];
    if (!tool.is_object() || tool.value("type", ordered_json("function")) != "function")
      fail(place, at, "is not a {\"type\": \"function\", \"function\": {...}} object");
    const ordered_json& function = named_function(tool, place, at, "\"name\", \"description\", \"parameters\"");
    check_string(function, "description", place, at + ".function", false);
    if (function.contains("parameters") && !function["parameters"].is_object())
      fail(place, at + ".function.parameters", "is not a JSON Schema object");
  }
}

}  // namespace nvfp4lm
