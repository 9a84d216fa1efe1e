// `nvfp4lm chat --model M`: an interactive conversation that keeps its history (infer/chat_session.h) and reuses
// the KV cache across turns. Reads one message per line from stdin: /reset, /system TEXT, /exit, /help; Ctrl-D
// (end of input) ends. On a terminal a "> " marker is shown; under a pipe stdout gets only the answers (one
// newline after each) and stderr a statistics line per turn, so it can be scripted and tested.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "core/error.h"
#include "core/logging.h"
#include "infer/chat_repl.h"
#include "infer/chat_session.h"
#include "infer/qwen3_cached_lm.h"
#include "infer/stop_conditions.h"

namespace nvfp4lm::cli {
namespace {

struct ChatCliOptions {
  ModelFlags model;
  DeviceFlags device;
  GuardFlags guard;
  std::string cuda_graph = "on";
  std::string system;
  bool no_think = false;
  bool deterministic = false;
  std::string chat_template = "auto";
  int64_t max_tokens = 1024;
  int64_t context = 8192;
  SamplingOptions sampling;
  std::vector<std::string> stops;
};

int run_chat(const ChatCliOptions& cli) {
  cli.sampling.validate();
  NVFP4LM_CHECK(cli.max_tokens > 0, "--max-tokens must be positive, got {}", cli.max_tokens);
  NVFP4LM_CHECK(cli.context > 1, "--context must be at least 2 tokens, got {}", cli.context);
  const int adapter = single_lora_adapter("chat", cli.model);
  const Device device = setup_device(cli.device);
  const auto guard = start_memory_guard(cli.guard, device);
  set_deterministic(device, cli.deterministic);
  const Qwen3Model model = load_model("chat", cli.model, device);
  const Tokenizer tokenizer = load_tokenizer(model);

  const int64_t model_context = model.config().max_position_embeddings;
  const int64_t context = std::min(cli.context, model_context);
  if (context < cli.context)
    log::warn("--context {} capped to the model's max_position_embeddings {}", cli.context, model_context);
  Qwen3CachedLm lm(model, context,
                   fmt::format("the conversation's context of {} tokens (--context, at most max_position_embeddings "
                               "{})",
                               context, model_context),
                   decode_mode_for(device, cli.cuda_graph), adapter);

  ChatSessionOptions options;
  options.generation.max_new_tokens = cli.max_tokens;
  options.generation.sampling = cli.sampling;
  options.generation.stop_strings = cli.stops;
  options.generation.eos_ids =
      end_of_sequence_ids(model.config(), find_generation_config(model.source()), tokenizer, model.config().vocab_size);
  options.chat_template.emplace(ChatTemplate::resolve(tokenizer, cli.chat_template));
  if (cli.no_think) options.enable_thinking = false;
  options.system_prompt = cli.system;
  log::info("sampling: {}; context {} tokens; max {} new tokens per turn", cli.sampling.describe(), context,
            cli.max_tokens);

  ChatSession session(lm, tokenizer, options);
  const bool interactive = ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
  run_chat_repl(session, std::cin, std::cout, std::cerr, interactive);
  return 0;
}

CommandRegistration chat_registration(
    "chat", "Chat with a model interactively (keeps history; /reset, /system, /exit)",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<ChatCliOptions>();
      add_flags(app, model_flags(options->model));
      add_flags(app, lora_adapter_flags(options->model, /*several=*/false));
      add_flags(app, cpu_matmul_flags(options->model, "int8"));
      add_flags(app,
                {
                    FlagUse(rows::system(), options->system),
                    FlagUse(rows::chat_template(), options->chat_template),
                    FlagUse(rows::no_think(), options->no_think),
                    FlagUse({.name = "--max-tokens",
                             .help = "most new tokens per answer (default 1024)",
                             .value = FlagNumber<int64_t>{{1, int64_t{1} << 24}}},
                            options->max_tokens),
                    FlagUse(rows::context(), options->context,
                            "tokens the conversation may hold (KV cache size; default 8192, capped at the model's)"),
                });
      add_flags(app, sampling_flags(options->sampling));
      add_flags(
          app, {FlagUse(rows::stop(), options->stops, "end an answer before this text (repeat the flag for several)")});
      add_flags(app, device_flags(options->device));
      add_flags(app, guard_flags(options->guard));
      add_flags(app, {FlagUse(rows::cuda_graph(), options->cuda_graph),
                      FlagUse(rows::deterministic(), options->deterministic)});
      return [options] { return run_chat(*options); };
    },
    41);

}  // namespace
}  // namespace nvfp4lm::cli
