// `nvfp4lm apply-template`: prints the text a chat template renders for a conversation, as transformers'
// apply_chat_template(messages, tools=..., add_generation_prompt=..., tokenize=False, **kwargs) returns it (and as
// serve's POST /apply-template answers), so a user can see the exact prompt a model is trained on or asked with.
// The conversation is a JSON file (or - for stdin): a list of messages, or an object with "messages" and optionally
// "tools" and "chat_template_kwargs" (a training record or an OpenAI chat request body). The text goes to stdout as
// it is, with no newline added; which template rendered it goes to stderr.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"
#include "core/logging.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::cli {
namespace {

struct ApplyTemplateOptions {
  std::string model;
  std::string tokenizer_dir;
  std::string chat_template = "auto";
  std::string messages_file;
  std::string tools_file;
  std::string kwargs_json;
  bool add_generation_prompt = false;
  bool count_tokens = false;
};

nlohmann::ordered_json read_ordered_json(const std::string& path, const char* what) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    NVFP4LM_CHECK(!std::cin.bad(), "apply-template: reading {} from standard input failed", what);
  } else {
    text = read_text_file(path);
  }
  OrderedJsonParseResult parsed = try_parse_ordered_json(text);
  NVFP4LM_CHECK(parsed.ok(), "apply-template: {} ({}) is not valid JSON: {}", what, path == "-" ? "stdin" : path,
                parsed.error);
  return std::move(parsed.value);
}

int run_apply_template(const ApplyTemplateOptions& options) {
  const std::string tokenizer_dir = !options.tokenizer_dir.empty() ? options.tokenizer_dir
                                    : !options.model.empty()       ? options.model
                                                                   : bundled_qwen3_tokenizer_dir().string();
  const Tokenizer tokenizer = Tokenizer::load(tokenizer_dir);
  const ChatTemplate chat_template = ChatTemplate::resolve(tokenizer, options.chat_template);
  log::info("apply-template: chat template {}; special tokens from {}", chat_template.origin(), tokenizer_dir);

  const nlohmann::ordered_json conversation = read_ordered_json(options.messages_file, "--messages");
  NVFP4LM_CHECK(conversation.is_array() || (conversation.is_object() && conversation.contains("messages")),
                "apply-template: --messages must hold a list of messages or an object with \"messages\"");
  const nlohmann::ordered_json& messages = conversation.is_array() ? conversation : conversation["messages"];
  ChatRenderOptions render;
  render.add_generation_prompt = options.add_generation_prompt;
  if (conversation.is_object() && conversation.contains("tools")) render.tools = conversation["tools"];
  if (!options.tools_file.empty()) render.tools = read_ordered_json(options.tools_file, "--tools");
  if (!render.tools.is_null()) check_chat_tools(render.tools, "--tools: ");
  if (conversation.is_object() && conversation.contains("chat_template_kwargs")) {
    NVFP4LM_CHECK(conversation["chat_template_kwargs"].is_object(),
                  "apply-template: \"chat_template_kwargs\" must be an object");
    render.kwargs = conversation["chat_template_kwargs"];
  }
  if (!options.kwargs_json.empty()) {
    OrderedJsonParseResult kwargs = try_parse_ordered_json(options.kwargs_json);
    NVFP4LM_CHECK(kwargs.ok() && kwargs.value.is_object(),
                  "apply-template: --kwargs must be a JSON object, such as '{{\"enable_thinking\": false}}'{}",
                  kwargs.ok() ? "" : " (" + kwargs.error + ")");
    for (const auto& [key, value] : kwargs.value.items()) render.kwargs[key] = value;
  }
  // As apply_chat_template: the conversation as written (a tool turn need not answer a call), every key passed on.
  const std::vector<ChatMessage> read = read_chat_messages(messages, "--messages: ", ToolTurns::AsWritten);
  const std::string text = chat_template.render(read, render);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (options.count_tokens) log::info("apply-template: {} tokens", tokenizer.encode(text).size());
  return 0;
}

CommandRegistration apply_template_registration(
    "apply-template", "Print the text a chat template renders for a conversation (apply_chat_template)",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<ApplyTemplateOptions>();
      add_flags(
          app,
          {
              FlagUse({.name = "--messages",
                       .help = "JSON file (- for stdin): a list of messages, or an object with \"messages\" and "
                               "optionally \"tools\" and \"chat_template_kwargs\"",
                       .value_name = "FILE"},
                      options->messages_file)
                  .required(),
              FlagUse(rows::model(), options->model,
                      "model path (HF dir, ModelOpt dir or .dat): its tokenizer's chat template and special tokens"),
              FlagUse(rows::tokenizer(), options->tokenizer_dir,
                      "directory with tokenizer.json (overrides --model; default: the bundled Qwen3 tokenizer)"),
              FlagUse(rows::chat_template(), options->chat_template),
              FlagUse({.name = "--tools", .help = "JSON file with the tools list (OpenAI form)", .value_name = "FILE"},
                      options->tools_file),
              FlagUse({.name = "--add-generation-prompt",
                       .help = "end with the assistant turn's opening, as a prompt for generation",
                       .value = FlagSwitch{}},
                      options->add_generation_prompt),
              FlagUse({.name = "--kwargs",
                       .help = "more template variables as a JSON object, e.g. '{\"enable_thinking\": false}'",
                       .value_name = "JSON"},
                      options->kwargs_json),
              FlagUse({.name = "--count-tokens",
                       .help = "also report the text's token count (on stderr)",
                       .value = FlagSwitch{}},
                      options->count_tokens),
          });
      return [options] { return run_apply_template(*options); };
    },
    61);

}  // namespace
}  // namespace nvfp4lm::cli
