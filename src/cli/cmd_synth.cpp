// `nvfp4lm synth (--config CONFIG.json | --preset NAME) OUT`: writes a random-initialised Qwen3 model in Hugging
// Face layout (io/synth_model.h), reproducible from --seed.
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/number_flags.h"
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
};

int run_synth(const SynthCliOptions& cli) {
  NVFP4LM_CHECK(cli.config.empty() != cli.preset.empty(), "synth: pass exactly one of --config FILE and --preset ({})",
                fmt::join(qwen3_preset_names(), ", "));
  const Qwen3Config config = cli.config.empty() ? qwen3_preset(cli.preset) : load_qwen3_config(cli.config);
  SynthOptions options;
  options.seed = cli.seed;
  NVFP4LM_CHECK(cli.dtype == "bf16" || cli.dtype == "f32", "--dtype must be bf16 or f32, got '{}'", cli.dtype);
  options.dtype = cli.dtype == "bf16" ? DType::BF16 : DType::F32;
  options.overwrite = cli.overwrite;
  NVFP4LM_CHECK(cli.max_shard_mb > 0, "--max-shard-mb must be positive");
  options.max_shard_bytes = cli.max_shard_mb * 1000000;
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

CommandRegistration registration(
    "synth", "Write a random-initialised Qwen3 model of any shape (HF safetensors)",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<SynthCliOptions>();
      app.add_option("out", options->out, "output directory")->required();
      app.add_option("--config", options->config, "HF config.json giving the shape");
      app.add_option("--preset", options->preset, "tiny, small (~100M) or qwen3-4b (Qwen3-4B-Instruct-2507 shape)");
      add_number_option(app, "--seed", options->seed, "random seed (default 0)");
      app.add_option("--dtype", options->dtype, "bf16 (default) or f32");
      app.add_option("--tokenizer", options->tokenizer,
                     "tokenizer directory to copy (default: the bundled Qwen3 tokenizer when vocab is 151936)");
      app.add_flag("--overwrite", options->overwrite, "replace OUT if it exists");
      add_number_option(app, "--max-shard-mb", options->max_shard_mb, "largest safetensors shard in MB (default 4000)",
                        {uint64_t{1}, uint64_t{1} << 24});
      return [options] { return run_synth(*options); };
    },
    60);

}  // namespace
}  // namespace nvfp4lm::cli
