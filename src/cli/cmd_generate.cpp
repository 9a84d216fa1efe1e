// `nvfp4lm generate --model M --prompt P`: one answer, streamed to stdout as it is generated, then one statistics
// line on stderr (prompt and generated tokens, prefill and decode tok/s, time to first token, peak memory).
// The prompt is wrapped in the model's chat template (with --system) unless --raw. Sampling defaults are
// Qwen3-Instruct-2507's recommendation (temperature 0.7, top-k 20, top-p 0.8, min-p 0); --temperature 0 is
// greedy decoding. stdout gets exactly the answer text plus one final newline.
//
// --json: stdout gets one JSON object instead (nothing streamed): the prompt's token ids, per generated token its id,
// text piece, bytes and logprob, with --logprobs K the K most likely alternatives, the answer text, the stop reason
// and the timing. Logprobs are infer/logprobs.h's: log_softmax of the model's raw logits over the tokenizer's ids,
// before temperature, top-k/top-p/min-p and repetition penalty (as OpenAI reports them). --prompt-ids feeds token
// ids directly ("1,2,3" or "[1,2,3]"), skipping the tokenizer and the chat template.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/number_flags.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/number_text.h"
#include "infer/generator.h"
#include "infer/logprobs.h"
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
  bool prompt_given = false;  // --prompt was on the command line (it may be empty)
  std::string system;
  bool raw = false;
  bool no_think = false;
  int64_t max_tokens = 512;
  SamplingOptions sampling;
  std::vector<std::string> stops;
  bool json = false;
  int64_t logprobs = 0;
  std::string prompt_ids;
};

// --prompt-ids "1,2,3" or "[1, 2, 3]": every element a token id of the tokenizer (UsageError otherwise).
std::vector<int32_t> parse_prompt_ids(std::string_view text, const Tokenizer& tokenizer) {
  auto trim = [](std::string_view part) {
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.front()))) part.remove_prefix(1);
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.back()))) part.remove_suffix(1);
    return part;
  };
  std::string_view list = trim(text);
  if (list.size() >= 2 && list.front() == '[' && list.back() == ']') list = trim(list.substr(1, list.size() - 2));
  if (list.empty()) throw UsageError("--prompt-ids is empty: give token ids such as 1,2,3 or [1,2,3]");
  const auto vocab = static_cast<int32_t>(tokenizer.vocab_size());
  std::vector<int32_t> ids;
  for (size_t start = 0;;) {
    const size_t comma = list.find(',', start);
    const std::string_view part = trim(list.substr(start, comma == std::string_view::npos ? comma : comma - start));
    std::string problem;
    const std::optional<int32_t> id = parse_number<int32_t>(part, {0, vocab - 1}, problem);
    if (!id) {
      throw UsageError(fmt::format(
          "--prompt-ids: element {} '{}' {}: token ids of the model's tokenizer ({}) are whole numbers in [0, {})",
          ids.size() + 1, part, problem, tokenizer.origin(), vocab));
    }
    ids.push_back(*id);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return ids;
}

// The checks between flags that CLI11 cannot express (UsageError, exit 2).
void check_flag_combinations(const GenerateCliOptions& cli) {
  if (cli.prompt_given == !cli.prompt_ids.empty())
    throw UsageError("give exactly one of --prompt TEXT and --prompt-ids IDS");
  if (!cli.prompt_ids.empty() && (cli.raw || !cli.system.empty() || cli.no_think))
    throw UsageError("--prompt-ids are fed as they are: --raw, --system and --no-think do not apply to them");
  if (cli.logprobs > 0 && !cli.json)
    throw UsageError("--logprobs K needs --json (the logprobs are part of its output)");
  if (cli.raw && !cli.system.empty()) throw UsageError("--system has no effect with --raw (the prompt is used as-is)");
}

nlohmann::json token_json(const Tokenizer& tokenizer, const TokenLogprob& token) {
  const int32_t ids[1] = {token.id};
  const std::string_view bytes = tokenizer.token_bytes(token.id);
  nlohmann::json byte_list = nlohmann::json::array();
  for (const char byte : bytes) byte_list.push_back(static_cast<unsigned char>(byte));
  return {
      {"id", token.id}, {"text", tokenizer.decode(ids)}, {"bytes", std::move(byte_list)}, {"logprob", token.logprob}};
}

// generate --json's object (see the top of this file).
nlohmann::json generation_json(const Qwen3Model& model, const Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
                               const GenerationResult& result, const std::vector<NextTokenLogprobs>& logprobs,
                               const GenerateCliOptions& cli) {
  nlohmann::json tokens = nlohmann::json::array();
  for (const NextTokenLogprobs& step : logprobs) {
    nlohmann::json token = token_json(tokenizer, step.chosen);
    if (cli.logprobs > 0) {
      nlohmann::json top = nlohmann::json::array();
      for (const TokenLogprob& alternative : step.top) top.push_back(token_json(tokenizer, alternative));
      token["top_logprobs"] = std::move(top);
    }
    tokens.push_back(std::move(token));
  }
  const GenerationStats& stats = result.stats;
  nlohmann::json timing = {{"prompt_tokens", stats.prompt_tokens},
                           {"generated_tokens", stats.generated_tokens},
                           {"prefill_seconds", stats.prefill_seconds},
                           {"time_to_first_token_seconds", stats.time_to_first_token_seconds},
                           {"decode_seconds", stats.decode_seconds},
                           {"prefill_tokens_per_second", stats.prefill_tokens_per_second()},
                           {"decode_tokens_per_second", stats.decode_tokens_per_second()},
                           {"peak_device_bytes", stats.peak_device_bytes},
                           {"peak_rss_bytes", stats.peak_rss_bytes}};
  if (model.device().is_cuda() && cuda_is_emulated())
    timing["note"] = "emulated CUDA device on the CPU: timings are the emulator's, not a GPU's";
  return {{"model", model.source().string()},
          {"device", model.device().label()},
          {"compute_path", model.compute_path()},
          {"sampling", cli.sampling.describe()},
          {"logprobs",
           "log_softmax of the raw logits over the tokenizer's ids, before temperature, top-k, top-p, "
           "min-p and repetition penalty"},
          {"prompt_ids", prompt},
          {"tokens", std::move(tokens)},
          {"text", result.text},
          {"stop_reason", stop_reason_name(result.stop_reason)},
          {"stop_detail", result.stop_detail},
          {"timing", std::move(timing)}};
}

int run_generate(const GenerateCliOptions& cli) {
  cli.sampling.validate();
  NVFP4LM_CHECK(cli.max_tokens > 0, "--max-tokens must be positive, got {}", cli.max_tokens);
  check_flag_combinations(cli);
  const Device device = setup_device(cli.device);
  const Qwen3Model model = load_model("generate", cli.model, device);
  const Tokenizer tokenizer = load_tokenizer(model);

  std::vector<int32_t> prompt;
  if (!cli.prompt_ids.empty()) {
    prompt = parse_prompt_ids(cli.prompt_ids, tokenizer);
  } else if (cli.raw) {
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

  std::vector<NextTokenLogprobs> logprobs;
  if (cli.json) {
    const int64_t candidates =
        std::min<int64_t>(model.config().vocab_size, static_cast<int64_t>(tokenizer.vocab_size()));
    options.on_token = [&logprobs, &cli, candidates](int32_t token, std::span<const float> logits) {
      logprobs.push_back(next_token_logprobs(logits, candidates, token, cli.logprobs));
    };
  }
  if (device.is_cuda()) log::info("decode steps: {}", lm.decode_path());
  Generator generator(lm, tokenizer, options);
  const GenerationResult result = generator.generate(prompt, [&](std::string_view piece) {
    if (cli.json) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  const std::string out = cli.json ? generation_json(model, tokenizer, prompt, result, logprobs, cli).dump(2) : "";
  std::fwrite(out.data(), 1, out.size(), stdout);
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
      add_cpu_matmul_flag(app, options->model, "bf16");
      CLI::Option* prompt =
          app.add_option("--prompt", options->prompt, "the user message (or, with --raw, the text to continue)");
      app.add_option("--prompt-ids", options->prompt_ids,
                     "token ids to continue, as they are (no tokenizer, no chat template): 1,2,3 or [1,2,3]");
      app.add_option("--system", options->system, "system prompt (chat template only)");
      app.add_flag("--raw", options->raw, "use the prompt as-is, without the chat template");
      app.add_flag("--no-think", options->no_think,
                   "hybrid-thinking templates: ask for an answer without a think block (enable_thinking=false)");
      add_number_option(app, "--max-tokens", options->max_tokens, "most new tokens to generate (default 512)",
                        {1, int64_t{1} << 24});
      add_sampling_flags(app, options->sampling);
      app.add_option("--stop", options->stops, "stop before this text (repeat the flag for several); it is not printed")
          ->allow_extra_args(false);
      app.add_flag("--json", options->json,
                   "print one JSON object: prompt ids, each token's id, text and logprob, the timing (no streaming)");
      add_number_option(app, "--logprobs", options->logprobs,
                        "with --json: also the K most likely tokens at each step, with their logprobs (default 0)",
                        {0, 1000});
      add_device_flags(app, options->device);
      add_cuda_graph_flag(app, options->cuda_graph);
      return [options, prompt] {
        options->prompt_given = prompt->count() > 0;
        return run_generate(*options);
      };
    },
    40);

}  // namespace
}  // namespace nvfp4lm::cli
