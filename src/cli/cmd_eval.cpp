// `nvfp4lm eval --model M --data FILE [--reference R]`: mean loss, perplexity and token accuracy of a model on a
// data file (tools/eval.h), with KL divergence and top-1 agreement against a reference model. Prints the header line
// (device, compute path, precision), a progress bar on stderr, and the result on stdout (--json: one JSON object).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/number_flags.h"
#include "cli/progress_bar.h"
#include "core/logging.h"
#include "tokenizer/chat_template.h"
#include "tools/eval.h"
#include "train/metrics.h"
#include "train/train_options.h"

namespace nvfp4lm::cli {
namespace {

struct EvalCliOptions {
  ModelFlags model;
  DeviceFlags device;
  std::string reference;
  std::string data;
  std::string data_format = "auto";
  std::string data_template = "chat";
  std::string chat_template = "auto";
  bool all_tokens = false;
  bool json = false;
  int64_t seq_len = 0;
  int64_t stride = 0;
  int64_t max_tokens = 0;
};

int run_eval(const EvalCliOptions& cli) {
  EvalOptions options;
  options.data = cli.data;
  options.data_format = parse_flag_value("--data-format", cli.data_format, parse_data_format);
  options.data_template = parse_flag_value("--data-template", cli.data_template, parse_pair_template);
  options.chat_template = cli.chat_template;
  options.score_everything = cli.all_tokens;
  options.seq_len = cli.seq_len;
  options.stride = cli.stride;
  options.max_tokens = cli.max_tokens;

  const Device device = setup_device(cli.device);
  const Qwen3Model model = load_model("eval", cli.model, device);
  const Tokenizer tokenizer = load_tokenizer(model);
  std::optional<Qwen3Model> reference;
  if (!cli.reference.empty()) {
    ModelFlags flags;
    flags.model = cli.reference;
    flags.cpu_matmul = cli.model.cpu_matmul;  // both models through the same kernels
    reference.emplace(load_second_model("reference", flags, device));
    std::optional<Tokenizer> reference_tokenizer;
    if (reference->tokenizer_dir()) reference_tokenizer.emplace(Tokenizer::load(*reference->tokenizer_dir()));
    check_reference_model(model, tokenizer, *reference, reference_tokenizer ? &*reference_tokenizer : nullptr);
  }

  ProgressBar bar("eval", "rows", ProgressDisplay::stderr_is_terminal());
  const EvalResult result =
      evaluate_model(model, tokenizer, reference ? &*reference : nullptr, options, [&](const EvalProgress& p) {
        bar.update(p.rows_done, p.rows_total, p.seconds,
                   fmt::format("{}/{} tokens scored", p.tokens_done, p.tokens_total));
      });
  bar.finish();
  const std::string printed = cli.json ? eval_result_json(result).dump(2) + "\n" : format_eval_result(result);
  std::fwrite(printed.data(), 1, printed.size(), stdout);
  return 0;
}

CommandRegistration registration(
    "eval", "Measure a model on data: loss, perplexity, token accuracy; KL and top-1 agreement vs a reference",
    [](CLI::App& app) -> CommandRun {
      auto cli = std::make_shared<EvalCliOptions>();
      add_model_flags(app, cli->model);
      add_cpu_matmul_flag(app, cli->model, "fp32");
      app.add_option("--data", cli->data, "data to score: .jsonl (messages or prompt/completion), .tsv or .txt")
          ->required();
      app.add_option("--reference", cli->reference,
                     "a version of the same model to compare with (e.g. the BF16 source of an NVFP4 export): adds "
                     "KL(reference || model) and top-1 agreement");
      app.add_flag("--json", cli->json, "print the result as one JSON object");
      add_number_option(app, "--seq-len", cli->seq_len,
                        "tokens per window (default: 512, or the model's context if shorter)",
                        {int64_t{0}, int64_t{1} << 24});
      add_number_option(app, "--stride", cli->stride,
                        "a text longer than --seq-len is read by windows starting every this many tokens, each scoring "
                        "the tokens its predecessor did not (default: seq-len / 2)",
                        {int64_t{0}, int64_t{1} << 24});
      add_number_option(app, "--max-tokens", cli->max_tokens, "stop after scoring this many tokens (default: all)",
                        {int64_t{0}, int64_t{1} << 40});
      app.add_option("--data-format", cli->data_format, "auto (by extension, default), jsonl, tsv, text");
      app.add_option("--data-template", cli->data_template, "prompt/target pairs: chat (default) or raw");
      add_chat_template_flag(app, cli->chat_template);
      app.add_flag("--all-tokens", cli->all_tokens,
                   "score every token, prompts included (default: what training scores, e.g. assistant tokens)");
      add_device_flags(app, cli->device);
      return [cli] { return run_eval(*cli); };
    },
    38);

}  // namespace
}  // namespace nvfp4lm::cli
