// `nvfp4lm eval --model M --data FILE [--lora ADAPTER] [--reference R]`: mean loss, perplexity and token accuracy of a
// model (with a LoRA adapter over it) on a data file (tools/eval.h), with KL divergence and top-1 agreement against a
// reference model (e.g. the base without the adapter). Prints the header line
// (device, compute path, precision), a progress bar on stderr, and the result on stdout (--json: one JSON object).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "cli/progress_bar.h"
#include "cli/train_flags_cli.h"
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
  int64_t seq_len = 0;     // 0: not given (the default of EvalOptions)
  int64_t stride = 0;      // 0: not given
  int64_t max_tokens = 0;  // 0: not given (all)
};

int run_eval(const EvalCliOptions& cli) {
  EvalOptions options;
  options.data = cli.data;
  options.data_format = parse_data_format(cli.data_format);  // checked while parsing (the flag table below)
  options.data_template = parse_pair_template(cli.data_template);
  options.chat_template = cli.chat_template;
  options.score_everything = cli.all_tokens;
  options.seq_len = cli.seq_len;
  options.stride = cli.stride;
  options.max_tokens = cli.max_tokens;

  options.adapter = single_lora_adapter("eval", cli.model);
  const Device device = setup_device(cli.device);
  const Qwen3Model model = load_model("eval", cli.model, device);
  const Tokenizer tokenizer = load_tokenizer(model);
  std::optional<Qwen3Model> reference;
  if (!cli.reference.empty()) {
    ModelFlags flags;
    flags.model = cli.reference;
    flags.cpu_matmul = cli.model.cpu_matmul;  // both models through the same kernels
    flags.w4a4 = cli.model.w4a4;
    reference.emplace(load_second_model("reference", flags, device));
    std::optional<Tokenizer> reference_tokenizer;
    if (reference->tokenizer_dir()) reference_tokenizer.emplace(Tokenizer::load(*reference->tokenizer_dir()));
    check_reference_model(model, tokenizer, *reference, reference_tokenizer ? &*reference_tokenizer : nullptr);
  }

  ProgressBar bar("eval", "rows", stderr_is_terminal());
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

CommandRegistration eval_registration(
    "eval", "Measure a model on data: loss, perplexity, token accuracy; KL and top-1 agreement vs a reference",
    [](CLI::App& app) -> CommandRun {
      auto cli = std::make_shared<EvalCliOptions>();
      add_flags(app, model_flags(cli->model));
      add_flags(app, lora_adapter_flags(cli->model, /*several=*/false));
      add_flags(app, cpu_matmul_flags(cli->model, "fp32"));
      add_flags(
          app,
          {
              FlagUse({.name = "--data", .help = "data to score: .jsonl (messages or prompt/completion), .tsv or .txt"},
                      cli->data)
                  .required(),
              FlagUse({.name = "--reference",
                       .help = "a version of the same model to compare with (e.g. the BF16 source of an NVFP4 "
                               "export): adds KL(reference || model) and top-1 agreement"},
                      cli->reference),
              FlagUse(rows::json(), cli->json, "print the result as one JSON object"),
              FlagUse({.name = "--seq-len",
                       .help = "tokens per window (default: 512, or the model's context if shorter)",
                       .value = FlagNumber<int64_t>{{2, int64_t{1} << 24}}},
                      cli->seq_len),
              FlagUse({.name = "--stride",
                       .help = "a text longer than --seq-len is read by windows starting every this many tokens, each "
                               "scoring the tokens its predecessor did not (default: seq-len / 2)",
                       .value = FlagNumber<int64_t>{{1, int64_t{1} << 24}}},
                      cli->stride),
              FlagUse({.name = "--max-tokens",
                       .help = "stop after scoring this many tokens (default: all)",
                       .value = FlagNumber<int64_t>{{1, int64_t{1} << 40}}},
                      cli->max_tokens),
              FlagUse(train_flag_row("data_format"), cli->data_format),
              FlagUse(train_flag_row("data_template"), cli->data_template),
              FlagUse(rows::chat_template(), cli->chat_template),
              FlagUse({.name = "--all-tokens",
                       .help = "score every token, prompts included (default: what training scores, e.g. assistant "
                               "tokens)",
                       .value = FlagSwitch{}},
                      cli->all_tokens),
          });
      add_flags(app, device_flags(cli->device));
      return [cli] { return run_eval(*cli); };
    },
    38);

}  // namespace
}  // namespace nvfp4lm::cli
