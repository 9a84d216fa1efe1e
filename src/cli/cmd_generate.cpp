// `nvfp4lm generate --model M --prompt P`: one answer, streamed to stdout as it is generated, then one statistics
// line on stderr (prompt and generated tokens, prefill and decode tok/s, time to first token, peak memory).
// The prompt is wrapped in the model's chat template (with --system) unless --raw. Sampling defaults are
// Qwen3-Instruct-2507's recommendation (temperature 0.7, top-k 20, top-p 0.8, min-p 0); --temperature 0 is
// greedy decoding. stdout gets exactly the answer text plus one final newline.
//
// --json: stdout gets one JSON object instead (nothing streamed): the prompt's token ids, per generated token its id,
// text piece, bytes and logprob, with --logprobs K the K most likely alternatives, the answer text, the stop reason
// and the timing. Logprobs are infer/logprobs.h's: log_softmax of the model's raw logits over the tokenizer's ids,
// before logit bias, penalties, temperature, top-k/top-p and min-p (as OpenAI reports them). --prompt-ids feeds token
// ids directly ("1,2,3" or "[1,2,3]"), skipping the tokenizer and the chat template.
//
// `generate --prompts FILE.jsonl --out FILE.jsonl`: every line's prompt through the batch engine (continuous
// batching, --max-batch at a time), answers written to --out (infer/prompt_batch.h); a summary line on stderr.
#include <algorithm>
#include <cctype>
#include <chrono>
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
#include "cli/flag_rows.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/memory.h"
#include "core/number_text.h"
#include "infer/batch_engine.h"
#include "infer/generator.h"
#include "infer/logprobs.h"
#include "infer/prompt_batch.h"
#include "infer/qwen3_cached_lm.h"
#include "infer/stop_conditions.h"
#include "tokenizer/chat.h"

namespace nvfp4lm::cli {
namespace {

struct GenerateCliOptions {
  ModelFlags model;
  DeviceFlags device;
  GuardFlags guard;
  std::string cuda_graph = "on";
  std::string prompt;
  bool prompt_given = false;  // --prompt was on the command line (it may be empty)
  std::string prompts_file;
  std::string out;
  bool overwrite = false;
  int64_t max_batch = 8;
  std::string system;
  bool raw = false;
  bool no_think = false;
  bool deterministic = false;
  std::string chat_template = "auto";
  int64_t max_tokens = 512;
  SamplingOptions sampling;
  std::vector<std::string> stops;
  bool json = false;
  int64_t logprobs = 0;
  std::string prompt_ids;
};

PromptFormat prompt_format(const GenerateCliOptions& cli, const Tokenizer& tokenizer) {
  PromptFormat format;
  format.raw = cli.raw;
  format.system = cli.system;
  if (!cli.raw) format.chat_template.emplace(ChatTemplate::resolve(tokenizer, cli.chat_template));
  if (cli.no_think) format.enable_thinking = false;
  return format;
}

// --prompts FILE.jsonl --out FILE.jsonl.
int run_prompt_file(const GenerateCliOptions& cli, const Qwen3Model& model, const Tokenizer& tokenizer,
                    const Device device, int adapter) {
  const std::vector<PromptLine> lines = read_prompt_lines(cli.prompts_file, tokenizer, prompt_format(cli, tokenizer));
  const int64_t model_context = model.config().max_position_embeddings;
  std::vector<SequenceSpec> specs;
  int64_t context = 2;
  for (size_t i = 0; i < lines.size(); ++i) {
    SequenceSpec spec;
    spec.prompt = lines[i].prompt;
    spec.adapter = adapter;
    spec.options.max_new_tokens = lines[i].max_tokens.value_or(cli.max_tokens);
    spec.options.sampling = cli.sampling;
    spec.options.sampling.seed = cli.sampling.seed + i;
    spec.options.stop_strings = cli.stops;
    spec.options.eos_ids = end_of_sequence_ids(model.config(), find_generation_config(model.source()), tokenizer,
                                               model.config().vocab_size);
    NVFP4LM_CHECK(static_cast<int64_t>(spec.prompt.size()) <= model_context,
                  "{} line {}: the prompt has {} tokens but the model's context (max_position_embeddings) is {}",
                  cli.prompts_file, i + 1, spec.prompt.size(), model_context);
    context = std::max(context, static_cast<int64_t>(spec.prompt.size()) +
                                    std::min(spec.options.max_new_tokens, model_context));  // no overflow
    specs.push_back(std::move(spec));
  }
  context = std::min(context, model_context);
  BatchEngineOptions engine_options;
  engine_options.context = context;
  engine_options.slots = BatchEngine::slots_within_memory(model, context, cli.max_batch);
  engine_options.decode = decode_mode_for(device, cli.cuda_graph);
  BatchEngine engine(model, tokenizer, engine_options);
  log::info("generate: {} prompts, {} at a time, {} tokens per sequence, decode {}; sampling: {} (seed + line index)",
            lines.size(), engine.slots(), context, engine.decode_path(), cli.sampling.describe());

  const auto start = std::chrono::steady_clock::now();
  size_t done = 0;
  const std::vector<BatchAnswer> answers = run_batch(engine, std::move(specs), [&](size_t, const BatchAnswer&) {
    if (++done % 16 == 0) log::info("generate: {} of {} answered", done, lines.size());
  });
  std::string output;
  int64_t generated = 0;
  for (size_t i = 0; i < answers.size(); ++i) {
    output += answer_line(i, lines[i], answers[i]) + "\n";
    generated += static_cast<int64_t>(answers[i].tokens.size());
  }
  write_file_atomic(cli.out, output, cli.overwrite);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string summary = fmt::format(
      "wrote {}: {} answers, {} generated tokens in {:.2f} s ({:.1f} tok/s), peak RSS {:.3f} GiB\n", cli.out,
      answers.size(), generated, seconds, seconds > 0 ? generated / seconds : 0.0, to_gib(peak_rss_bytes()));
  std::fwrite(summary.data(), 1, summary.size(), stderr);
  return 0;
}

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
          "--prompt-ids: element {}: {}: token ids of the model's tokenizer ({}) are whole numbers in [0, {})",
          ids.size() + 1, problem, tokenizer.origin(), vocab));
    }
    ids.push_back(*id);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return ids;
}

// The checks between flags that CLI11 cannot express (UsageError, exit 2).
void check_flag_combinations(const GenerateCliOptions& cli) {
  if (cli.prompts_file.empty()) {
    if (!cli.prompt_given && cli.prompt_ids.empty())
      throw UsageError(
          "generate: give --prompt TEXT or --prompt-ids IDS, or --prompts FILE.jsonl with --out FILE.jsonl");
    if (cli.prompt_given && !cli.prompt_ids.empty())
      throw UsageError("give exactly one of --prompt TEXT and --prompt-ids IDS");
    if (!cli.out.empty()) throw UsageError("--out goes with --prompts FILE.jsonl (a single --prompt prints to stdout)");
  } else {
    if (cli.prompt_given || !cli.prompt_ids.empty())
      throw UsageError("give either --prompt (or --prompt-ids) or --prompts, not both");
    if (cli.out.empty()) throw UsageError("--prompts needs --out FILE.jsonl for the answers");
    if (cli.json)
      throw UsageError("--json goes with a single --prompt (--prompts writes its answers as JSONL to --out)");
  }
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
           "log_softmax of the raw logits over the tokenizer's ids, before logit bias, penalties, temperature, "
           "top-k, top-p and min-p"},
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
  const int adapter = single_lora_adapter("generate", cli.model);
  if (!cli.prompts_file.empty())
    guard_output(cli.out, "--out", {{cli.prompts_file, "--prompts"}, {cli.model.model, "the model (--model)"}},
                 cli.overwrite, OutputKind::File);
  const Device device = setup_device(cli.device);
  const auto guard = start_memory_guard(cli.guard, device);
  set_deterministic(device, cli.deterministic);
  const Qwen3Model model = load_model("generate", cli.model, device);
  const Tokenizer tokenizer = load_tokenizer(model);
  if (!cli.prompts_file.empty()) return run_prompt_file(cli, model, tokenizer, device, adapter);

  std::vector<int32_t> prompt;
  if (!cli.prompt_ids.empty()) {
    prompt = parse_prompt_ids(cli.prompt_ids, tokenizer);
  } else {
    prompt = encode_prompt(tokenizer, cli.prompt, prompt_format(cli, tokenizer));
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
                   decode_mode_for(device, cli.cuda_graph), adapter);

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

CommandRegistration generate_registration(
    "generate", "Generate one answer to a prompt, streamed, with prefill/decode timing",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<GenerateCliOptions>();
      add_flags(app, model_flags(options->model));
      add_flags(app, lora_adapter_flags(options->model, /*several=*/false));
      add_flags(app, cpu_matmul_flags(options->model, "int8"));
      add_flags(
          app,
          {
              FlagUse({.name = "--prompt", .help = "the user message (or, with --raw, the text to continue)"},
                      options->prompt),
              FlagUse({.name = "--prompt-ids",
                       .help = "token ids to continue, as they are (no tokenizer, no chat template): 1,2,3 or [1,2,3]"},
                      options->prompt_ids),
              FlagUse({.name = "--prompts",
                       .help = "JSONL file of prompts ({\"prompt\": ...} or {\"messages\": [...]} per line) answered "
                               "in batches"},
                      options->prompts_file),
              FlagUse({.name = "--out", .help = "with --prompts: JSONL file for the answers, one line per prompt"},
                      options->out),
              FlagUse(rows::overwrite(), options->overwrite, "with --prompts: replace --out if it exists"),
              FlagUse(rows::max_batch(), options->max_batch,
                      "with --prompts: most sequences decoded together (default 8)"),
              FlagUse(rows::system(), options->system, "system prompt (chat template only)"),
              FlagUse(
                  {.name = "--raw", .help = "use the prompt as-is, without the chat template", .value = FlagSwitch{}},
                  options->raw),
              FlagUse(rows::chat_template(), options->chat_template),
              FlagUse(rows::no_think(), options->no_think),
              FlagUse({.name = "--max-tokens",
                       .help = "most new tokens to generate (default 512)",
                       .value = FlagNumber<int64_t>{{1, kMaxGenerateTokens}}},
                      options->max_tokens),
          });
      add_flags(app, sampling_flags(options->sampling));
      add_flags(
          app,
          {
              FlagUse(rows::stop(), options->stops),
              FlagUse({.name = "--json",
                       .help = "print one JSON object: prompt ids, each token's id, text and logprob, the timing (no "
                               "streaming)",
                       .value = FlagSwitch{}},
                      options->json),
              FlagUse(
                  {.name = "--logprobs",
                   .help = "with --json: also the K most likely tokens at each step, with their logprobs (default 0)",
                   .value = FlagNumber<int64_t>{{0, 1000}}},
                  options->logprobs),
          });
      add_flags(app, device_flags(options->device));
      add_flags(app, guard_flags(options->guard));
      add_flags(app, {FlagUse(rows::cuda_graph(), options->cuda_graph),
                      FlagUse(rows::deterministic(), options->deterministic)});
      const CLI::Option* prompt = app.get_option("--prompt");
      return [options, prompt] {
        options->prompt_given = prompt->count() > 0;
        return run_generate(*options);
      };
    },
    40);

}  // namespace
}  // namespace nvfp4lm::cli
