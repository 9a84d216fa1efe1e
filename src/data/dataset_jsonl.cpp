// JSON-lines datasets: {"messages": [...]} conversations and {"prompt", "completion"} pairs (dataset.h).
// A line is parsed on its own, so a syntax error names its line; blank lines are skipped. A file that starts
// with '[' is one JSON array of the same objects, numbered by entry.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "core/text_excerpt.h"
#include "data/dataset_records.h"

namespace nvfp4lm::data {
namespace {

// Ordered: a record's messages and tools reach the chat template with their keys in the file's order.
using ordered_json = nlohmann::ordered_json;

std::string key_list(const ordered_json& object) {
  std::string keys;
  size_t shown = 0;
  for (auto it = object.begin(); it != object.end(); ++it, ++shown) {
    if (shown == 8) {
      keys += fmt::format(", ... ({} keys)", object.size());
      break;
    }
    if (!keys.empty()) keys += ", ";
    keys += quoted_excerpt(it.key(), 40);
  }
  return keys.empty() ? "none" : keys;
}

// The string at object[key]; Error naming `place` when it is missing or not a string.
std::string string_field(const ordered_json& object, const char* key, const std::string& place,
                         const std::string& what) {
  auto it = object.find(key);
  NVFP4LM_CHECK(it != object.end(), "{}: {} has no \"{}\"", place, what, key);
  NVFP4LM_CHECK(it->is_string(), "{}: \"{}\" of {} is {}, expected a string", place, key, what, it->type_name());
  return it->get<std::string>();
}

// messages (tokenizer/chat_message.h) and the record's tools, both handed to the chat template as they are.
RawRecord conversation(const ordered_json& object, const std::string& place) {
  RawRecord record;
  record.kind = RecordKind::Chat;
  record.messages = read_chat_messages(object["messages"], place);
  if (object.contains("tools") && !object["tools"].is_null()) {
    check_chat_tools(object["tools"], place);
    record.tools = object["tools"];
  }
  return record;
}

RawRecord pair(const ordered_json& object, const std::string& place) {
  RawRecord record;
  record.kind = RecordKind::Pair;
  record.prompt = string_field(object, "prompt", place, "the object");
  record.target = string_field(object, "completion", place, "the object");
  NVFP4LM_CHECK(!is_blank(record.target), "{}: \"completion\" is empty; every pair needs a target to train on", place);
  return record;
}

RawRecord record_of(const ordered_json& object, const std::string& place) {
  NVFP4LM_CHECK(object.is_object(),
                "{}: expected a JSON object ({{\"messages\": [...]}} or {{\"prompt\", "
                "\"completion\"}}), got {}",
                place, object.type_name());
  const bool has_messages = object.contains("messages");
  const bool has_pair = object.contains("prompt") || object.contains("completion");
  NVFP4LM_CHECK(!(has_messages && has_pair), "{}: has both \"messages\" and \"prompt\"/\"completion\"; use one", place);
  NVFP4LM_CHECK(has_messages || has_pair,
                "{}: missing \"messages\" (or \"prompt\" and \"completion\"); the object's keys are {}", place,
                key_list(object));
  return has_messages ? conversation(object, place) : pair(object, place);
}

}  // namespace

ParsedFile parse_jsonl(std::string_view content, const std::string& file) {
  ParsedFile parsed;
  const size_t first = content.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && content[first] == '[') {
    OrderedJsonParseResult parsed_array = try_parse_ordered_json(content);
    NVFP4LM_CHECK(parsed_array.ok(), "{}: bad JSON (read as one JSON array because it starts with '['): {}", file,
                  parsed_array.error);
    const ordered_json& array = parsed_array.value;
    parsed.numbered_by_entry = true;
    for (size_t i = 0; i < array.size(); ++i) {
      const int64_t entry = static_cast<int64_t>(i) + 1;
      RawRecord record = record_of(array[i], where(file, entry, true));
      record.line = entry;
      parsed.records.push_back(std::move(record));
    }
    return parsed;
  }
  for (const Line& line : split_lines(content)) {
    if (is_blank(line.text)) continue;
    const std::string place = where(file, line.number);
    OrderedJsonParseResult parsed_line = try_parse_ordered_json(line.text);
    if (!parsed_line.ok()) {
      // The parser saw one line, so its "line 1, column N" is just the column.
      std::string problem = parsed_line.error;
      if (size_t at = problem.find("at line 1, column "); at != std::string::npos) problem.erase(at + 3, 8);
      NVFP4LM_FAIL("{}: bad JSON: {} (each line must be one complete JSON object)", place, problem);
    }
    const ordered_json& object = parsed_line.value;
    RawRecord record = record_of(object, place);
    record.line = line.number;
    parsed.records.push_back(std::move(record));
  }
  return parsed;
}

}  // namespace nvfp4lm::data
