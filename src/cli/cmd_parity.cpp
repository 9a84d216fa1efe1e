// `nvfp4lm parity --model M [--other M2] [--prompts FILE]`: the same token sequences through every inference path
// this build has and the forward training computes, compared position by position (tools/parity.h): a table (or --json)
// of max |Δlogit|, top-1 agreement and the first diverging token per prompt and pair; exit 1 naming the pairs over
// their tolerance.
// --device auto (default) runs the CUDA paths when a CUDA device can run (real or emulated), cpu never, cuda[:N]
// insists on one. --write-baseline FILE records a passing run; --baseline FILE checks a later build or model against
// it (tools/parity_baseline.h).
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "core/error.h"
#include "core/files.h"
#include "core/publish.h"
#include "tokenizer/utf8.h"
#include "tools/parity.h"
#include "tools/parity_baseline.h"

namespace nvfp4lm::cli {
namespace {

struct ParityCliOptions {
  ModelFlags model;
  std::string other;
  std::string prompts_file;
  int64_t new_tokens = 8;
  std::vector<std::string> tolerances;
  std::string device = "auto";
  std::string temp_dir;
  std::string train_forward = "on";
  std::string write_baseline;
  std::string baseline;
  bool json = false;
};

// One prompt per non-empty line, each valid UTF-8 (the tokenizer's input).
std::vector<std::string> read_prompts(const std::string& path) {
  const std::string text = read_text_file(path);
  std::vector<std::string> prompts;
  size_t start = 0;
  for (int number = 1; start <= text.size(); ++number) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t bad = tokenizer::find_invalid_utf8(line);
    NVFP4LM_CHECK(bad == line.size(),
                  "--prompts {} line {}: not valid UTF-8 at byte {} of the line (0x{:02X}); save the file as UTF-8",
                  path, number, bad + 1, static_cast<unsigned char>(line[bad]));
    if (line.find_first_not_of(" \t") != std::string::npos) prompts.push_back(line);
    start = end + 1;
  }
  NVFP4LM_CHECK(!prompts.empty(), "--prompts {}: no prompt in it (one user message per line)", path);
  return prompts;
}

int run_parity_command(const ParityCliOptions& cli) {
  ParityOptions options;
  options.model = cli.model.model;
  if (!cli.model.config.empty()) options.open.config_path = cli.model.config;
  if (!cli.model.tokenizer.empty()) options.open.tokenizer_dir = cli.model.tokenizer;
  if (!cli.other.empty()) options.other = cli.other;
  options.new_tokens = cli.new_tokens;
  for (const std::string& assignment : cli.tolerances) options.tolerances.set_from_text(assignment);
  options.temp_dir = cli.temp_dir;
  options.train_forward = cli.train_forward == "on";
  options.record_top_logits = !cli.write_baseline.empty();
  if (cli.device == "auto") {
    const std::string reason = device_unavailable_reason(Device::cuda(0));
    if (reason.empty()) {
      options.cuda = Device::cuda(0);
    } else {
      options.no_cuda_reason = reason;
    }
  } else if (cli.device == "cpu") {
    options.no_cuda_reason = "--device cpu";
  } else {
    const Device device = open_device(cli.device, /*max_memory_gib=*/0);
    if (!device.is_cuda()) throw UsageError(fmt::format("--device {}: expected auto, cpu, cuda or cuda:N", cli.device));
    options.cuda = device;
  }
  if (!cli.prompts_file.empty()) options.prompts = read_prompts(cli.prompts_file);
  std::optional<ParityBaseline> baseline;
  if (!cli.baseline.empty()) {
    if (!cli.prompts_file.empty()) throw UsageError("--baseline runs the baseline's own prompts; leave out --prompts");
    baseline = read_parity_baseline(cli.baseline);
    options.baseline = &*baseline;
    log::info("checking against the baseline {} (written {} by nvfp4lm {} for {}; {} prompts)", cli.baseline,
              baseline->written, baseline->build.value("version", std::string("?")), baseline->model,
              baseline->prompts.size());
  }
  if (!cli.write_baseline.empty())
    guard_output(cli.write_baseline, "--write-baseline", {{cli.model.model, "the model"}}, /*overwrite=*/false,
                 OutputKind::File);

  print_header("parity", options.cuda ? "cpu and " + options.cuda->label() : std::string("cpu"),
               "every inference path of this build and the training forward (one per row below)",
               options.cuda ? "fp32 on the CPU, bf16 activations with fp32 accumulation on CUDA" : "fp32");
  const ParityReport report = run_parity(options);
  const std::string out = cli.json
                              ? parity_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"
                              : parity_table(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  if (!cli.write_baseline.empty()) {
    NVFP4LM_CHECK(report.pass(), "parity failed: no baseline written to {} (a baseline records a run that passes)",
                  cli.write_baseline);
    write_file_atomic(cli.write_baseline, parity_baseline_json(report, options.new_tokens).dump(1) + "\n",
                      /*overwrite=*/false);
    log::info("wrote the baseline {}: {} prompts, {} paths; check a later build or model with --baseline {}",
              cli.write_baseline, report.prompts.size(), report.prompts.front().top_logits.size(), cli.write_baseline);
  }
  if (!report.pass()) {
    const size_t shown = std::min<size_t>(report.failures.size(), 3);
    const std::vector<std::string> first(report.failures.begin(), report.failures.begin() + shown);
    NVFP4LM_FAIL("parity: {} comparison(s) over tolerance: {}{} (tolerances: --tolerance CLASS=VALUE)",
                 report.failures.size(), fmt::join(first, "; "),
                 report.failures.size() > shown ? fmt::format("; and {} more", report.failures.size() - shown) : "");
  }
  return 0;
}

CommandRegistration parity_registration(
    "parity", "Run the same prompts through every inference path and compare their logits position by position",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<ParityCliOptions>();
      add_flags(app, model_flags(options->model));
      add_flags(
          app,
          {
              FlagUse({.name = "--other",
                       .help = "a second model to compare with MODEL (the same tokenizer); judged by the 'other' "
                               "tolerance"},
                      options->other),
              FlagUse({.name = "--prompts",
                       .help = "a text file, one user message per line (default: built-in English and Chinese "
                               "questions)"},
                      options->prompts_file),
              FlagUse({.name = "--new-tokens",
                       .help = "greedy tokens the reference adds to each prompt, then fed to every path (default 8)",
                       .value = FlagNumber<int64_t>{{1, 4096}}},
                      options->new_tokens),
              FlagUse(rows::tolerance(), options->tolerances,
                      "CLASS=VALUE: a pass bound relative to the largest reference logit, for the class identical, "
                      "fp32, bf16-weights, bf16-activations, int8-activations, other, requantized, baseline or "
                      "w4a4-activations (repeat the flag for several)"),
              FlagUse(rows::device(), options->device,
                      "auto (default: the CUDA paths too when a CUDA device can run), cpu, cuda or cuda:N"),
              FlagUse({.name = "--temp-dir",
                       .help = "where the .dat / ModelOpt / BF16 copies are written and removed (default: the "
                               "system's)"},
                      options->temp_dir),
              FlagUse({.name = "--train-forward",
                       .help = "on (default): also the forward training computes (QAT w4a16, CPU and CUDA) and its "
                               "export, which hold the model as training does (~8 bytes a parameter); off: not",
                       .value = one_of({"on", "off"}, /*shown=*/true)},
                      options->train_forward),
              FlagUse({.name = "--write-baseline",
                       .help = "write a known-good baseline of this run to FILE (the prompts, the greedy tokens, each "
                               "path's top logits, the build and devices); refused when the run fails"},
                      options->write_baseline),
              FlagUse({.name = "--baseline",
                       .help = "check this build and model against a baseline FILE: its prompts and tokens, each "
                               "path's move (tolerance class 'baseline'), the greedy tokens"},
                      options->baseline),
              FlagUse(rows::json(), options->json, "print the report as JSON instead of a table"),
          });
      return [options] { return run_parity_command(*options); };
    },
    85);

}  // namespace
}  // namespace nvfp4lm::cli
