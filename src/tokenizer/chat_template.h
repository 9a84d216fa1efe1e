// The chat template a run renders conversations with: the tokenizer's own Jinja template (tokenizer_config.json
// "chat_template"), run by the Jinja interpreter (tokenizer/jinja/template.h) exactly as Hugging Face's
// apply_chat_template runs it — one template, one rendering, for training data, `generate`, `chat`, `eval` and
// `serve`, so a model is asked questions in exactly the form it was trained on.
//
// Which template (--chat-template VALUE, for every command that renders chats):
//   auto                   the tokenizer's own; a tokenizer without one (a bare tokenizer.json) uses the bundled
//                          qwen3-instruct-2507 ChatML template and says so in the run's description;
//   qwen3-instruct-2507,   the templates of the Qwen3-*-Instruct-2507, Qwen3-*-Thinking-2507 and original
//   qwen3-thinking-2507,   (hybrid-thinking) Qwen3 releases, bundled (bundled_chat_templates.cpp);
//   qwen3-hybrid
//   a file path            a Jinja file (e.g. a template exported from another model's tokenizer_config.json).
// A template the interpreter cannot run is an Error naming the construct and its line when it is loaded, never a
// fallback to another rendering.
//
// Rendering (render): the template receives messages (ChatMessage::to_json: role, content and every other field
// of the message), add_generation_prompt, tools (the list, or none), documents (none), enable_thinking (only when
// set: templates test `enable_thinking is defined`), the bos_token / eos_token / unk_token / pad_token strings the
// tokenizer_config.json names, and any extra keyword arguments (serve's chat_template_kwargs), as
// apply_chat_template passes them (transformers' render_jinja_template).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tokenizer/chat_message.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

namespace jinja {
class Template;
}

struct ChatRenderOptions {
  bool add_generation_prompt = false;
  std::optional<bool> enable_thinking;                               // unset: not passed (the template's default)
  nlohmann::ordered_json tools;                                      // null: none; else a list (check_chat_tools)
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // more template variables
};

class ChatTemplate {
 public:
  // Parses `source` (Error naming the unsupported construct and line, prefixed with `origin`). `special` gives the
  // special-token strings the template may print (bos_token, eos_token, ...): a tokenizer's, or none.
  ChatTemplate(std::string source, std::string origin, nlohmann::ordered_json special_tokens = {});

  // The template of the rule above for `tokenizer`; `requested` is --chat-template's value (nullopt or "auto":
  // the tokenizer's own).
  static ChatTemplate resolve(const Tokenizer& tokenizer, std::optional<std::string> requested = std::nullopt);

  // Error from the template (raise_exception, a type error) prefixed with origin().
  std::string render(std::span<const ChatMessage> messages, const ChatRenderOptions& options = {}) const;

  // Where the template came from, for run descriptions and errors: "the tokenizer's own (DIR/tokenizer_config.json)",
  // "bundled qwen3-instruct-2507", "--chat-template FILE".
  const std::string& origin() const { return origin_; }
  const std::string& source() const { return source_; }
  // Whether the generation prompt opens a think block (Qwen3-Thinking-2507: "<|im_start|>assistant\n<think>\n"):
  // the answer then starts inside the reasoning, which serve splits into reasoning_content.
  bool prompt_opens_think() const { return prompt_opens_think_; }
  // Whether the template renders `tools` (it mentions the variable).
  bool supports_tools() const;

 private:
  std::string source_;
  std::string origin_;
  nlohmann::ordered_json special_tokens_;
  std::shared_ptr<const jinja::Template> template_;
  bool prompt_opens_think_ = false;
};

// The names of the bundled templates ("qwen3-instruct-2507", ...), and a bundled template's text (nullopt for an
// unknown name).
std::span<const std::string_view> bundled_chat_template_names();
std::optional<std::string_view> bundled_chat_template(std::string_view name);

// --chat-template's value checked early (a name, "auto" or an existing file): Error listing the choices otherwise.
void check_chat_template_flag(std::string_view value);

}  // namespace nvfp4lm
