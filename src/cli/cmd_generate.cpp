// `nvfp4lm generate --model M --prompt P`: one answer, streamed to stdout as it is generated, then one statistics
// line on stderr (prompt and generated tokens, prefill and decode tok/s, time to first token, peak memory).
// The prompt is wrapped in the model's chat template (with --system) unless --raw. Sampling defaults are
// Qwen3-Instruct-2507's recommendation (temperature 0.7, top-k 20, top-p 0.8, min-p 0); --temperature 0 is
// greedy decoding. stdout gets exactly the answer text plus one final newline.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/number_flags.h"
#include "core/error.h"
#include "core/logging.h"
#include "infer/generator.h"
#include "infer/qwen3_cached_lm.h"
#include "infer/stop_conditions.h"
#include "tokenizer/chat.h"

namespace nvfp4lm::cli {
namespace {

struct GenerateCliOptions {
  ModelFlags model;
  DeviceFlags device;
  std::string cuda_graph = "on";
  std::string prompt;
  std::string system;
  bool raw = false;
  bool no_think = false;
  int64_t max_tokens = 512;
  SamplingOptions sampling;
  std::vector<std::string> stops;
};

int run_generate(const GenerateCliOptions& cli) {
  cli.sampling.validate();
  NVFP4LM_CHECK(cli.max_tokens > 0, "--max-tokens must be positive, got {}", cli.max_tokens);
  NVFP4LM_CHECK(!(cli.raw && !cli.system.empty()), "--system has no effect with --raw (the prompt is used as-is)");
  const Device device = setup_device(cli.device);
  const Qwen3Model model = load_model("generate", cli.model, device);
  const Tokenizer tokenizer = load_tokenizer(model);

  std::vector<int32_t> prompt;
  if (cli.raw) {
    prompt = tokenizer.encode(cli.prompt);
  } else {
    std::vector<ChatMessage> messages;
    if (!cli.system.empty()) messages.push_back({"system", cli.system});
    messages.push_back({"user", cli.prompt});
    ChatOptions chat;
    chat.add_generation_prompt = true;
    chat.style = detect_chat_template(tokenizer.chat_template_source());
    chat.enable_thinking = !cli.no_think;
    prompt = tokenizer.encode(render_chat(messages, chat));
  }
  NVFP4LM_CHECK(!prompt.empty(), "--prompt is empty: with --raw there is nothing to continue from");

  const int64_t context = model.config().max_position_embeddings;
  NVFP4LM_CHECK(static_cast<int64_t>(prompt.size()) <= context,
                "the prompt has {} tokens but the model's context (max_position_embeddings in its config.json) is "
                "{} tokens; shorten the prompt",
                prompt.size(), context);
  const int64_t capacity = std::min<int64_t>(static_cast<int64_t>(prompt.size()) + cli.max_tokens, context);
  Qwen3CachedLm lm(model, capacity,
                   capacity == context
                       ? fmt::format("the model's context of {} tokens (max_position_embeddings)", context)
                       : fmt::format("the KV cache of {} tokens (prompt + --max-tokens)", capacity),
                   decode_mode_for(device, cli.cuda_graph));

  GenerationOptions options;
  options.max_new_tokens = cli.max_tokens;
  options.sampling = cli.sampling;
  options.stop_strings = cli.stops;
  options.eos_ids =
      end_of_sequence_ids(model.config(), find_generation_config(model.source()), tokenizer, model.config().vocab_size);
  log::info("sampling: {}; max {} new tokens; {} end-of-sequence ids; {} stop strings", cli.sampling.describe(),
            cli.max_tokens, options.eos_ids.size(), cli.stops.size());

  if (device.is_cuda()) log::info("decode steps: {}", lm.decode_path());
  Generator generator(lm, tokenizer, options);
  const GenerationResult result = generator.generate(prompt, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const std::string stats = format_generation_stats(result.stats, device) +
                            fmt::format(", stop: {}{}\n", stop_reason_name(result.stop_reason),
                                        result.stop_detail.empty() ? "" : " (" + result.stop_detail + ")");
  std::fwrite(stats.data(), 1, stats.size(), stderr);
  return 0;
}

CommandRegistration registration(
    "generate", "Generate one answer to a prompt, streamed, with prefill/decode timing",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<GenerateCliOptions>();
      add_model_flags(app, options->model);
      app.add_option("--prompt", options->prompt, "the user message (or, with --raw, the text to continue)")
          ->required();
      app.add_option("--system", options->system, "system prompt (chat template only)");
      app.add_flag("--raw", options->raw, "use the prompt as-is, without the chat template");
      app.add_flag("--no-think", options->no_think,
                   "hybrid-thinking templates: ask for an answer without a think block (enable_thinking=false)");
      add_number_option(app, "--max-tokens", options->max_tokens, "most new tokens to generate (default 512)",
                        {1, int64_t{1} << 24});
      add_sampling_flags(app, options->sampling);
      app.add_option("--stop", options->stops, "stop before this text (repeat the flag for several); it is not printed")
          ->allow_extra_args(false);
      add_device_flags(app, options->device);
      add_cuda_graph_flag(app, options->cuda_graph);
      return [options] { return run_generate(*options); };
    },
    40);

}  // namespace
}  // namespace nvfp4lm::cli
