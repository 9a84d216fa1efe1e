// `nvfp4lm generate --model M --prompt P`: one answer, streamed to stdout as it is generated, then one statistics
// line on stderr (prompt and generated tokens, prefill and decode tok/s, time to first token, peak memory).
// The prompt is wrapped in the model's chat template (with --system) unless --raw. Sampling defaults are
// Qwen3-Instruct-2507's recommendation (temperature 0.7, top-k 20, top-p 0.8, min-p 0); --temperature 0 is
// greedy decoding. stdout gets exactly the answer text plus one final newline.
// `generate --prompts FILE.jsonl --out FILE.jsonl`: every line's prompt through the batch engine (continuous
// batching, --max-batch at a time), answers written to --out (infer/prompt_batch.h); a summary line on stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/number_flags.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/memory.h"
#include "infer/batch_engine.h"
#include "infer/generator.h"
#include "infer/prompt_batch.h"
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
  std::string prompts_file;
  std::string out;
  bool overwrite = false;
  int64_t max_batch = 8;
  std::string system;
  bool raw = false;
  bool no_think = false;
  int64_t max_tokens = 512;
  SamplingOptions sampling;
  std::vector<std::string> stops;
  bool prompt_given = false;
};

PromptFormat prompt_format(const GenerateCliOptions& cli, const Tokenizer& tokenizer) {
  PromptFormat format;
  format.raw = cli.raw;
  format.system = cli.system;
  format.style = detect_chat_template(tokenizer.chat_template_source());
  format.enable_thinking = !cli.no_think;
  return format;
}

// --prompts FILE.jsonl --out FILE.jsonl.
int run_prompt_file(const GenerateCliOptions& cli, const Qwen3Model& model, const Tokenizer& tokenizer,
                    const Device device) {
  const std::vector<PromptLine> lines = read_prompt_lines(cli.prompts_file, tokenizer, prompt_format(cli, tokenizer));
  const int64_t model_context = model.config().max_position_embeddings;
  std::vector<SequenceSpec> specs;
  int64_t context = 2;
  for (size_t i = 0; i < lines.size(); ++i) {
    SequenceSpec spec;
    spec.prompt = lines[i].prompt;
    spec.options.max_new_tokens = lines[i].max_tokens.value_or(cli.max_tokens);
    spec.options.sampling = cli.sampling;
    spec.options.sampling.seed = cli.sampling.seed + i;
    spec.options.stop_strings = cli.stops;
    spec.options.eos_ids = end_of_sequence_ids(model.config(), find_generation_config(model.source()), tokenizer,
                                               model.config().vocab_size);
    NVFP4LM_CHECK(static_cast<int64_t>(spec.prompt.size()) <= model_context,
                  "{} line {}: the prompt has {} tokens but the model's context (max_position_embeddings) is {}",
                  cli.prompts_file, i + 1, spec.prompt.size(), model_context);
    context = std::max(context, static_cast<int64_t>(spec.prompt.size()) + spec.options.max_new_tokens);
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
  write_file_atomic(cli.out, output);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string summary = fmt::format(
      "wrote {}: {} answers, {} generated tokens in {:.2f} s ({:.1f} tok/s), peak RSS {:.3f} GiB\n", cli.out,
      answers.size(), generated, seconds, seconds > 0 ? generated / seconds : 0.0, to_gib(peak_rss_bytes()));
  std::fwrite(summary.data(), 1, summary.size(), stderr);
  return 0;
}

int run_generate(const GenerateCliOptions& cli) {
  cli.sampling.validate();
  NVFP4LM_CHECK(cli.max_tokens > 0, "--max-tokens must be positive, got {}", cli.max_tokens);
  NVFP4LM_CHECK(!(cli.raw && !cli.system.empty()), "--system has no effect with --raw (the prompt is used as-is)");
  if (cli.prompts_file.empty()) {
    if (!cli.prompt_given)
      throw UsageError("generate: give --prompt TEXT, or --prompts FILE.jsonl with --out FILE.jsonl");
    if (!cli.out.empty()) throw UsageError("--out goes with --prompts FILE.jsonl (a single --prompt prints to stdout)");
  } else {
    if (cli.prompt_given) throw UsageError("give either --prompt or --prompts, not both");
    if (cli.out.empty()) throw UsageError("--prompts needs --out FILE.jsonl for the answers");
    guard_output(cli.out, "--out", {{cli.prompts_file, "--prompts"}, {cli.model.model, "the model (--model)"}},
                 cli.overwrite);
  }
  const Device device = setup_device(cli.device);
  const Qwen3Model model = load_model("generate", cli.model, device);
  const Tokenizer tokenizer = load_tokenizer(model);
  if (!cli.prompts_file.empty()) return run_prompt_file(cli, model, tokenizer, device);

  const std::vector<int32_t> prompt = encode_prompt(tokenizer, cli.prompt, prompt_format(cli, tokenizer));
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
      app.add_option("--prompt", options->prompt, "the user message (or, with --raw, the text to continue)");
      app.add_option("--prompts", options->prompts_file,
                     "JSONL file of prompts ({\"prompt\": ...} or {\"messages\": [...]} per line) answered in batches");
      app.add_option("--out", options->out, "with --prompts: JSONL file for the answers, one line per prompt");
      app.add_flag("--overwrite", options->overwrite, "with --prompts: replace --out if it exists");
      add_number_option(app, "--max-batch", options->max_batch,
                        "with --prompts: most sequences decoded together (default 8)", {int64_t{1}, int64_t{1024}});
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
      return [options, &app] {
        options->prompt_given = app.count("--prompt") > 0;
        return run_generate(*options);
      };
    },
    40);

}  // namespace
}  // namespace nvfp4lm::cli
