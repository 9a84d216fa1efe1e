// `nvfp4lm synth (--config CONFIG.json | --preset NAME) OUT`: writes a random-initialised Qwen3 model in Hugging
// Face layout (io/synth_model.h), reproducible from --seed.
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/flag_rows.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/memory.h"
#include "io/hf_config.h"
#include "io/synth_model.h"

namespace nvfp4lm::cli {
namespace {

struct SynthCliOptions {
  std::string config;
  std::string preset;
  std::string out;
  uint64_t seed = 0;
  std::string dtype = "bf16";
  std::string tokenizer;
  bool overwrite = false;
  uint64_t max_shard_mb = kDefaultMaxShardBytes / 1000000;
  double init_std = SynthOptions{}.init_std;
  double embedding_std = 0;
};

int run_synth(const SynthCliOptions& cli) {
  if (cli.config.empty() == cli.preset.empty())
    throw UsageError(fmt::format("synth: pass exactly one of --config FILE and --preset ({})",
                                 fmt::join(qwen3_preset_names(), ", ")));
  const Qwen3Config config = cli.config.empty() ? qwen3_preset(cli.preset) : load_qwen3_config(cli.config);
  SynthOptions options;
  options.seed = cli.seed;
  // --preset and --dtype were checked while parsing (the flag table below).
  options.dtype = cli.dtype == "bf16" ? DType::BF16 : DType::F32;
  options.overwrite = cli.overwrite;
  options.max_shard_bytes = cli.max_shard_mb * 1000000;
  options.init_std = static_cast<float>(cli.init_std);
  options.embedding_std = static_cast<float>(cli.embedding_std);
  if (!cli.tokenizer.empty()) options.tokenizer_dir = cli.tokenizer;

  guard_output(cli.out, "the output", {{cli.config, "--config"}, {cli.tokenizer, "--tokenizer"}}, cli.overwrite,
               OutputKind::Directory);
  log::info("synth: {} parameters, {} weights, seed {}", config.total_parameters(), cli.dtype, cli.seed);
  const auto start = std::chrono::steady_clock::now();
  const SynthReport report = synth_model(config, cli.out, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string text = fmt::format(
      "wrote {}: {} parameters, {:.1f} MiB in {} safetensors file(s), tokenizer {}\ntime {:.1f} s, peak RSS {:.2f} "
      "GiB\n",
      cli.out, report.parameters, to_mib(report.weight_bytes), report.shards,
      report.tokenizer_from ? report.tokenizer_from->string() : std::string("none"), seconds, to_gib(peak_rss_bytes()));
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

CommandRegistration synth_registration(
    "synth", "Write a random-initialised Qwen3 model of any shape (HF safetensors)",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<SynthCliOptions>();
      add_flags(app,
                {
                    FlagUse({.name = "out", .help = "output directory"}, options->out).required(),
                    FlagUse({.name = "--config", .help = "HF config.json giving the shape"}, options->config),
                    FlagUse(rows::preset(), options->preset,
                            "tiny, small (~100M) or qwen3-4b (Qwen3-4B-Instruct-2507 shape)"),
                    FlagUse(rows::seed(), options->seed),
                    FlagUse({.name = "--dtype", .help = "bf16 (default) or f32", .value = one_of({"bf16", "f32"})},
                            options->dtype),
                    FlagUse(rows::tokenizer(), options->tokenizer,
                            "tokenizer directory to copy (default: the bundled Qwen3 tokenizer when vocab is 151936)"),
                    FlagUse(rows::overwrite(), options->overwrite),
                    FlagUse(rows::max_shard_mb(), options->max_shard_mb),
                    FlagUse({.name = "--init-std",
                             .help = "standard deviation of the linear and embedding weights (default 0.02, as HF)",
                             .value = FlagNumber<double>{{1e-6, 100.0}}},
                            options->init_std),
                    FlagUse({.name = "--embedding-std",
                             .help = "standard deviation of embed_tokens and lm_head (default: --init-std); a wider "
                                     "head gives a base that adapters can train on (its logits spread as a trained "
                                     "model's do)",
                             .value = FlagNumber<double>{{1e-6, 100.0}}},
                            options->embedding_std),
                });
      return [options] { return run_synth(*options); };
    },
    60);

}  // namespace
}  // namespace nvfp4lm::cli
