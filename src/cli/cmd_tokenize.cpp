// `nvfp4lm tokenize`: reads UTF-8 text on stdin and prints its token ids (or token strings) as one JSON
// array on stdout. The text is used byte for byte (a trailing newline from `echo` is a token too; use
// `printf` or `echo -n` to avoid it).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string tokenizer_dir;
  bool tokens = false;
  bool chat = false;
  bool no_special = false;
  std::string chat_template = "auto";
};

int run_tokenize(const TokenizeOptions& options) {
  if (options.model.empty() && options.tokenizer_dir.empty())
    throw UsageError(fmt::format("tokenize: pass --model MODEL or --tokenizer DIR (the bundled Qwen3 tokenizer is {})",
                                 bundled_qwen3_tokenizer_dir().string()));
  Tokenizer tokenizer = Tokenizer::load(options.tokenizer_dir.empty() ? options.model : options.tokenizer_dir);
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  NVFP4LM_CHECK(!std::cin.bad(), "tokenize: reading standard input failed");
  if (options.chat) {
    const ChatMessage question("user", text);
    ChatRenderOptions render;
    render.add_generation_prompt = true;
    text = ChatTemplate::resolve(tokenizer, options.chat_template).render({&question, 1}, render);
  }
  std::vector<int32_t> ids = tokenizer.encode(text, /*allow_special=*/!options.no_special);
  nlohmann::json out = nlohmann::json::array();
  for (int32_t id : ids) {
    if (options.tokens) {
      out.push_back(std::string(tokenizer.token_text(id)));
    } else {
      out.push_back(id);
    }
  }
  std::string printed = out.dump() + "\n";
  std::fwrite(printed.data(), 1, printed.size(), stdout);
  return 0;
}

CommandRegistration tokenize_registration(
    "tokenize", "Print the token ids of the text on stdin as JSON",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<TokenizeOptions>();
      add_flags(
          app,
          {
              FlagUse(rows::model(), options->model,
                      "model path (HF dir, ModelOpt dir or .dat); its tokenizer is used"),
              FlagUse(rows::tokenizer(), options->tokenizer_dir, "directory with tokenizer.json (overrides --model)"),
              FlagUse({.name = "--tokens",
                       .help = "print token strings (HF form, e.g. \"Ġworld\") instead of ids",
                       .value = FlagSwitch{}},
                      options->tokens),
              FlagUse({.name = "--chat",
                       .help = "render stdin as one user message with the chat template (--chat-template) and "
                               "generation prompt first",
                       .value = FlagSwitch{}},
                      options->chat),
              FlagUse(rows::chat_template(), options->chat_template),
              FlagUse({.name = "--no-special",
                       .help = "encode special tokens written in the text as plain text",
                       .value = FlagSwitch{}},
                      options->no_special),
          });
      return [options] { return run_tokenize(*options); };
    },
    60);

}  // namespace
}  // namespace nvfp4lm::cli
