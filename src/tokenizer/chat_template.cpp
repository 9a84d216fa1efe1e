// See chat_template.h.
#include "tokenizer/chat_template.h"

#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "core/text_excerpt.h"
#include "tokenizer/jinja/template.h"

namespace nvfp4lm {
namespace {

using ordered_json = nlohmann::ordered_json;

// The names of the templates earlier versions of --chat-template took, still understood.
std::optional<std::string_view> legacy_name(std::string_view value) {
  if (value == "instruct-2507") return "qwen3-instruct-2507";
  if (value == "hybrid-thinking") return "qwen3-hybrid";
  return std::nullopt;
}

std::string choices() {
  std::string names = "auto";
  for (std::string_view name : bundled_chat_template_names()) names += fmt::format(", {}", name);
  return names + " or a Jinja file";
}

// bos_token, eos_token, unk_token, pad_token: what apply_chat_template passes of the tokenizer's special tokens map
// (the ones the tokenizer_config.json names).
ordered_json special_tokens_of(const Tokenizer& tokenizer) {
  ordered_json tokens = ordered_json::object();
  const SpecialTokenIds& special = tokenizer.special_ids();
  if (special.bos >= 0) tokens["bos_token"] = std::string(tokenizer.token_text(special.bos));
  if (special.eos >= 0) tokens["eos_token"] = std::string(tokenizer.token_text(special.eos));
  if (special.unk >= 0) tokens["unk_token"] = std::string(tokenizer.token_text(special.unk));
  if (special.pad >= 0) tokens["pad_token"] = std::string(tokenizer.token_text(special.pad));
  return tokens;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string origin, ordered_json special_tokens)
    : source_(std::move(source)), origin_(std::move(origin)), special_tokens_(std::move(special_tokens)) {
  if (!special_tokens_.is_object()) special_tokens_ = ordered_json::object();
  try {
    template_ = std::make_shared<const jinja::Template>(source_);
  } catch (const Error& e) {
    NVFP4LM_FAIL("chat template ({}) cannot be run: {}", origin_, e.what());
  }
  // Probe the generation prompt: what add_generation_prompt appends to a one-question conversation.
  try {
    const ChatMessage question("user", "?");
    ChatRenderOptions prompt;
    prompt.add_generation_prompt = true;
    const std::string with = render({&question, 1}, prompt);
    const std::string without = render({&question, 1});
    if (with.starts_with(without)) {
      const std::string_view generation = std::string_view(with).substr(without.size());
      prompt_opens_think_ = generation.rfind("<think>") != std::string_view::npos &&
                            generation.find("</think>", generation.rfind("<think>")) == std::string_view::npos;
    }
  } catch (const Error&) {
    // A template that refuses a lone question (e.g. one that requires a system turn) opens no think block we know of.
  }
}

ChatTemplate ChatTemplate::resolve(const Tokenizer& tokenizer, std::optional<std::string> requested) {
  ordered_json special = special_tokens_of(tokenizer);
  const std::string value = requested.value_or("auto");
  if (value == "auto") {
    if (!tokenizer.chat_template_source().empty())
      return ChatTemplate(tokenizer.chat_template_source(), fmt::format("the tokenizer's own, {}", tokenizer.origin()),
                          std::move(special));
    return ChatTemplate(std::string(*bundled_chat_template("qwen3-instruct-2507")),
                        "bundled qwen3-instruct-2507: the tokenizer has no chat template", std::move(special));
  }
  const std::string_view name = legacy_name(value).value_or(value);
  if (const auto bundled = bundled_chat_template(name))
    return ChatTemplate(std::string(*bundled), fmt::format("bundled {}", name), std::move(special));
  check_chat_template_flag(value);
  return ChatTemplate(read_text_file(value), fmt::format("--chat-template {}", value), std::move(special));
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, const ChatRenderOptions& options) const {
  ordered_json context = ordered_json::object();
  ordered_json& list = context["messages"] = ordered_json::array();
  for (const ChatMessage& message : messages) list.push_back(message.to_json());
  // tools and documents are None when not given, as apply_chat_template passes them (`tools is not none` is false,
  // and a template that iterates them fails as under transformers).
  context["tools"] = options.tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = options.add_generation_prompt;
  if (options.enable_thinking) context["enable_thinking"] = *options.enable_thinking;
  for (const auto& [key, value] : special_tokens_.items()) context[key] = value;
  for (const auto& [key, value] : options.kwargs.items()) context[key] = value;
  try {
    return template_->render(context);
  } catch (const Error& e) {
    NVFP4LM_FAIL("chat template ({}): {}", origin_, e.what());
  }
}

bool ChatTemplate::supports_tools() const { return source_.find("tools") != std::string::npos; }

void check_chat_template_flag(std::string_view value) {
  if (value == "auto" || legacy_name(value) || bundled_chat_template(value)) return;
  std::error_code error;
  NVFP4LM_CHECK(std::filesystem::is_regular_file(std::filesystem::path(value), error),
                "--chat-template {}: not a bundled template and no such file (choose {})", quoted_excerpt(value),
                choices());
}

}  // namespace nvfp4lm
