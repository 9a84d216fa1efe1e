// See chat.h. Rendering records the byte ranges that are trained; encode_chat tokenizes the whole text
// once (so ids match HF exactly) and marks every token whose source bytes overlap a trained range.
#include "tokenizer/chat.h"

#include "core/error.h"
#include "core/text_excerpt.h"

namespace nvfp4lm {
namespace {

struct Rendered {
  std::string text;
  std::vector<std::pair<size_t, size_t>> trained;  // byte ranges, in order
};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string_view before_first(std::string_view s, std::string_view sep) {
  size_t at = s.find(sep);
  return at == std::string_view::npos ? s : s.substr(0, at);
}
std::string_view after_last(std::string_view s, std::string_view sep) {
  size_t at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

Rendered render(std::span<const ChatMessage> messages, const ChatOptions& options) {
  const size_t count = messages.size();
  for (size_t i = 0; i < count; ++i) {
    const std::string& role = messages[i].role;
    NVFP4LM_CHECK(role == "system" || role == "user" || role == "assistant" || role == "tool",
                  "chat message {}: role {} is not one of system, user, assistant, tool", i, quoted_excerpt(role));
  }
  // Index of the last user message that is a real query (not a wrapped tool response); the templates
  // start from count - 1 when there is none.
  size_t last_query = count == 0 ? 0 : count - 1;
  for (size_t i = count; i-- > 0;) {
    const std::string& content = messages[i].content;
    if (messages[i].role == "user" &&
        !(starts_with(content, "<tool_response>") && ends_with(content, "</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  size_t last_assistant = count;
  for (size_t i = 0; i < count; ++i) {
    if (messages[i].role == "assistant") last_assistant = i;
  }

  Rendered out;
  std::string& text = out.text;
  for (size_t i = 0; i < count; ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system" && i == 0) {
      text += "<|im_start|>system\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "user" || m.role == "system") {
      text += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      text += "<|im_start|>assistant\n";
      size_t begin = text.size();
      std::string_view content = m.content;
      if (options.style == ChatTemplate::HybridThinking) {
        std::string_view reasoning;
        if (content.find("</think>") != std::string_view::npos) {
          reasoning = lstrip_newlines(after_last(rstrip_newlines(before_first(content, "</think>")), "<think>"));
          content = lstrip_newlines(after_last(content, "</think>"));
        }
        bool last = i + 1 == count;
        if (i > last_query && (last || !reasoning.empty())) {
          text += "<think>\n";
          text += rstrip_newlines(lstrip_newlines(reasoning));
          text += "\n</think>\n\n";
          content = lstrip_newlines(content);
        }
      }
      text += content;
      text += "<|im_end|>";
      if (options.train_all_assistant_turns || i == last_assistant) out.trained.push_back({begin, text.size()});
      text += "\n";
    } else {  // tool
      if (i == 0 || messages[i - 1].role != "tool") text += "<|im_start|>user";
      text += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == count || messages[i + 1].role != "tool") text += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) {
    text += "<|im_start|>assistant\n";
    if (options.style == ChatTemplate::HybridThinking && !options.enable_thinking) text += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace

ChatTemplate detect_chat_template(std::string_view jinja_template) {
  bool thinking = jinja_template.find("reasoning_content") != std::string_view::npos &&
                  jinja_template.find("<think>") != std::string_view::npos;
  return thinking ? ChatTemplate::HybridThinking : ChatTemplate::Instruct2507;
}

std::string render_chat(std::span<const ChatMessage> messages, const ChatOptions& options) {
  return render(messages, options).text;
}

std::string render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  ChatOptions options;
  options.add_generation_prompt = add_generation_prompt;
  return render(messages, options).text;
}

EncodedChat encode_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages, const ChatOptions& options) {
  Rendered rendered = render(messages, options);
  EncodedText encoded = tokenizer.encode_with_offsets(rendered.text, /*allow_special=*/true);
  EncodedChat result;
  result.ids = std::move(encoded.ids);
  result.train_mask.assign(result.ids.size(), 0);
  size_t range = 0;
  for (size_t i = 0; i < result.ids.size(); ++i) {
    auto [begin, end] = encoded.offsets[i];
    while (range < rendered.trained.size() && rendered.trained[range].second <= begin) ++range;
    if (range < rendered.trained.size() && rendered.trained[range].first < end) result.train_mask[i] = 1;
  }
  return result;
}

}  // namespace nvfp4lm
