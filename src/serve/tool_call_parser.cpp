// See tool_call_parser.h.
#include "serve/tool_call_parser.h"

#include <algorithm>

#include "core/json_text.h"
#include "serve/partial_tag.h"

namespace nvfp4lm::serve {
namespace {

constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t skip_space(std::string_view text, size_t at) {
  while (at < text.size() && is_space(text[at])) ++at;
  return at;
}

// The end of the JSON string starting at text[at] == '"'.
size_t string_end(std::string_view text, size_t at) {
  for (++at; at < text.size(); ++at) {
    if (text[at] == '\\') {
      ++at;
    } else if (text[at] == '"') {
      return at + 1;
    }
  }
  return text.size();
}

// The end of the JSON value starting at text[at], in text already known to be valid JSON.
size_t value_end(std::string_view text, size_t at) {
  int depth = 0;
  while (at < text.size()) {
    const char c = text[at];
    if (c == '"') {
      at = string_end(text, at);
      if (depth == 0) return at;
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') {
      if (--depth == 0) return at + 1;
      if (depth < 0) return at;
    }
    if (depth == 0 && (c == ',' || is_space(c))) return at;
    ++at;
  }
  return at;
}

// The text of the top-level member `key` of the valid JSON object `text` (the last one when written twice, as the
// parser keeps it).
std::string_view member_text(std::string_view text, std::string_view key) {
  std::string_view found;
  size_t at = skip_space(text, 0) + 1;  // past '{'
  while (true) {
    at = skip_space(text, at);
    if (at >= text.size() || text[at] != '"') return found;
    const size_t key_end = string_end(text, at);
    const std::string_view name = text.substr(at + 1, key_end - at - 2);
    at = skip_space(text, key_end) + 1;  // past ':'
    at = skip_space(text, at);
    const size_t end = value_end(text, at);
    if (name == key) found = text.substr(at, end - at);
    at = skip_space(text, end);
    if (at >= text.size() || text[at] != ',') return found;
    ++at;
  }
}

}  // namespace

bool parse_tool_call_body(std::string_view body, const std::vector<std::string>& tool_names, ToolCall& call) {
  const OrderedJsonParseResult parsed = try_parse_ordered_json(body);
  if (!parsed.ok() || !parsed.value.is_object()) return false;
  const auto name = parsed.value.find("name");
  const auto arguments = parsed.value.find("arguments");
  if (name == parsed.value.end() || !name->is_string() || arguments == parsed.value.end() || !arguments->is_object())
    return false;
  if (std::find(tool_names.begin(), tool_names.end(), name->get<std::string>()) == tool_names.end()) return false;
  // A key written with escapes ("argu\u006dents") is not found as written: take the parsed value's text then.
  const std::string_view written = member_text(body, "arguments");
  call.name = name->get<std::string>();
  call.arguments = written.empty() ? to_json_text(nlohmann::json(*arguments)) : std::string(written);
  return true;
}

ToolCallParser::ToolCallParser(std::vector<std::string> tool_names, size_t max_calls)
    : tool_names_(std::move(tool_names)), max_calls_(max_calls) {}

void ToolCallParser::emit_text(std::string text, ToolCallOutput& out) {
  if (after_call_) {
    const size_t start = skip_space(text, 0);
    text.erase(0, start);
    if (text.empty()) return;
    after_call_ = false;
  }
  out.content += text;
}

void ToolCallParser::close_block(const std::string& body, ToolCallOutput& out) {
  ToolCall call;
  if (!parse_tool_call_body(body, tool_names_, call)) {
    emit_text(held_space_ + std::string(kToolCallOpen) + body + std::string(kToolCallClose), out);
  } else {
    if (calls_ < max_calls_) out.calls.push_back(std::move(call));
    ++calls_;
    after_call_ = true;
  }
  held_space_.clear();
}

ToolCallOutput ToolCallParser::feed(std::string_view text) {
  ToolCallOutput out;
  pending_ += text;
  while (true) {
    if (in_block_) {
      const size_t close = pending_.find(kToolCallClose);
      if (close == std::string::npos) break;
      const std::string body = pending_.substr(0, close);
      pending_.erase(0, close + kToolCallClose.size());
      in_block_ = false;
      close_block(body, out);
      continue;
    }
    const size_t open = pending_.find(kToolCallOpen);
    if (open != std::string::npos) {
      size_t content_end = open;
      while (content_end > 0 && is_space(pending_[content_end - 1])) --content_end;
      emit_text(pending_.substr(0, content_end), out);
      held_space_ = pending_.substr(content_end, open - content_end);
      pending_.erase(0, open + kToolCallOpen.size());
      in_block_ = true;
      continue;
    }
    // Hold back what may still open a block: a partial tag and the whitespace before it.
    size_t keep_from = pending_.size() - partial_tag(pending_, kToolCallOpen);
    while (keep_from > 0 && is_space(pending_[keep_from - 1])) --keep_from;
    emit_text(pending_.substr(0, keep_from), out);
    pending_.erase(0, keep_from);
    break;
  }
  return out;
}

ToolCallOutput ToolCallParser::finish() {
  ToolCallOutput out;
  if (in_block_) {
    emit_text(held_space_ + std::string(kToolCallOpen) + pending_, out);
    in_block_ = false;
  } else {
    emit_text(pending_, out);
  }
  pending_.clear();
  held_space_.clear();
  return out;
}

}  // namespace nvfp4lm::serve
