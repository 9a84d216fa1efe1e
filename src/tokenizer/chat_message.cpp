// See chat_message.h.
#include "tokenizer/chat_message.h"

#include <fmt/format.h>

#include <algorithm>

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

// A tool call no tool message has answered yet: its id ("" in Hugging Face's form, which has none), its function's
// name and where it is.
struct OpenCall {
  std::string id, name, path;
};

// An assistant's tool calls checked as OpenAI's API checks them (its chat completions reference: "type" "function",
// "function.name" and "function.arguments", the arguments JSON text of an object); a call whose arguments are not an
// object would be trained as `{"arguments": {not json}` or sent to a tool as such. Two forms of the other keys are
// read: OpenAI's (each call has an "id" that its tool message names as tool_call_id) and the one transformers
// documents for apply_chat_template (no ids: the tool messages that follow answer the calls in order); an object for
// arguments is accepted too (that form's). The calls are added to `open_calls`, for the tool messages that answer
// them.
void check_tool_calls(const ordered_json& calls, std::string_view place, const std::string& path,
                      std::vector<OpenCall>& open_calls) {
  if (!calls.is_array()) fail(place, path, fmt::format("is {}, expected a list of tool calls", kind(calls)));
  if (calls.empty()) fail(place, path, "is an empty list: leave tool_calls out of a message that calls no tool");
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", path, i);
    const ordered_json& call = calls[i];
    if (!call.is_object())
      fail(place, at, fmt::format("is {}, expected {{\"id\", \"function\": {{\"name\", \"arguments\"}}}}", kind(call)));
    if (call.contains("type") && call["type"] != "function")
      fail(place, at + ".type", fmt::format("is {}, expected \"function\"", json_excerpt(call["type"], 40)));
    const ordered_json& function = named_function(call, place, at, "\"name\" and \"arguments\"");
    const auto arguments = function.find("arguments");
    if (arguments == function.end() || arguments->is_null())
      fail(place, at + ".function.arguments",
           "is missing: give the call's arguments as JSON text of an object (\"{}\" for none)");
    if (arguments->is_string()) {
      const ordered_json parsed = ordered_json::parse(arguments->get_ref<const std::string&>(), nullptr, false);
      if (parsed.is_discarded())
        fail(place, at + ".function.arguments",
             fmt::format("is not JSON text ({}): a call's arguments are a JSON object written as a string",
                         quoted_excerpt(arguments->get_ref<const std::string&>(), 40)));
      if (!parsed.is_object())
        fail(place, at + ".function.arguments",
             fmt::format("is JSON text of {}, expected an object (a function takes named arguments)", kind(parsed)));
    } else if (!arguments->is_object()) {
      fail(place, at + ".function.arguments", fmt::format("is {}, expected JSON text of an object", kind(*arguments)));
    }
    std::string call_id;
    if (const auto id = call.find("id"); id != call.end() && !id->is_null()) {
      if (!id->is_string() || id->get_ref<const std::string&>().empty())
        fail(place, at + ".id", fmt::format("is {}, expected a non-empty string (or no id at all)", kind(*id)));
      call_id = id->get_ref<const std::string&>();
      if (std::any_of(open_calls.begin(), open_calls.end(), [&](const OpenCall& c) { return c.id == call_id; }))
        fail(place, at + ".id",
             fmt::format("{} is the id of another call not yet answered", quoted_excerpt(call_id, 40)));
    }
    open_calls.push_back({call_id, function["name"].get<std::string>(), at});
  }
}

// A tool message answers a call of an assistant message before it that no other tool message answered: the one
// its tool_call_id names, or (Hugging Face's form, calls without ids) the first unanswered call, whose function
// "name" it repeats when it gives one. A tool result that answers no call would be trained, or shown to the model,
// as the answer to nothing.
void check_tool_answer(const ordered_json& message, std::string_view place, const std::string& path,
                       std::vector<OpenCall>& open_calls) {
  const auto id = message.find("tool_call_id");
  if (id != message.end() && !id->get_ref<const std::string&>().empty()) {
    const std::string& wanted = id->get_ref<const std::string&>();
    const auto open =
        std::find_if(open_calls.begin(), open_calls.end(), [&](const OpenCall& c) { return c.id == wanted; });
    if (open == open_calls.end())
      fail(place, path + ".tool_call_id",
           fmt::format("{} answers no earlier tool call (no assistant message before it made a call with that id, "
                       "or another tool message answered it already)",
                       quoted_excerpt(wanted, 40)));
    open_calls.erase(open);
    return;
  }
  if (open_calls.empty())
    fail(place, path + (id == message.end() ? "" : ".tool_call_id"),
         "is a tool message that answers no tool call: no assistant message before it made a call that is still "
         "unanswered");
  const OpenCall& first = open_calls.front();
  if (!first.id.empty())
    fail(place, path + ".tool_call_id",
         fmt::format("is missing: the call this tool message answers, {}, has the id {}; name it as tool_call_id",
                     first.path, quoted_excerpt(first.id, 40)));
  const auto name = message.find("name");
  if (name != message.end() && name->get_ref<const std::string&>() != first.name)
    fail(place, path + ".name",
         fmt::format("is {}, but the call this tool message answers (in order: {}) is {}",
                     quoted_excerpt(name->get_ref<const std::string&>(), 40), first.path,
                     quoted_excerpt(first.name, 40)));
  open_calls.erase(open_calls.begin());
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
  ordered_json message = {{"role", role}};
  if (content_sent != Sent::Absent)
    message["content"] = content_sent == Sent::Null ? ordered_json(nullptr) : ordered_json(content);
  for (const auto& [key, value] : fields.items()) message[key] = value;
  return message;
}

std::vector<ChatMessage> read_chat_messages(const ordered_json& messages, std::string_view place,
                                            ToolTurns tool_turns) {
  if (!messages.is_array() || messages.empty())
    fail(place, "messages",
         fmt::format("is {}, expected a non-empty list of {{\"role\", \"content\"}} objects",
                     messages.is_array() ? "an empty list" : kind(messages)));
  std::vector<ChatMessage> result;
  result.reserve(messages.size());
  std::vector<OpenCall> open_calls;  // tool calls no tool message has answered yet, in order
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
    const bool calls = message.contains("tool_calls") && !message["tool_calls"].is_null();
    // Only an assistant message that calls tools may come without content (OpenAI's rule): an assistant turn with
    // neither would be trained as an empty answer.
    parsed.content = read_content(message, place, path, parsed.role == "assistant" && calls);
    const auto sent = message.find("content");
    parsed.content_sent = sent == message.end() ? ChatMessage::Sent::Absent
                          : sent->is_null()     ? ChatMessage::Sent::Null
                                                : ChatMessage::Sent::Text;
    check_string(message, "reasoning_content", place, path, true);
    check_string(message, "tool_call_id", place, path, false);
    check_string(message, "name", place, path, false);
    if (calls) {
      if (parsed.role != "assistant") fail(place, path + ".tool_calls", "is only allowed on an assistant message");
      check_tool_calls(message["tool_calls"], place, path + ".tool_calls", open_calls);
    }
    if (parsed.role == "tool" && tool_turns == ToolTurns::MustAnswerCalls)
      check_tool_answer(message, place, path, open_calls);
    for (const auto& [key, value] : message.items()) {
      if (key == "role" || key == "content") continue;
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
