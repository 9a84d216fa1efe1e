// `nvfp4lm quantize MODEL OUT --format dat|modelopt|compressed-tensors|gguf [--gguf-type T]`: post-training NVFP4
// quantization of the projections (and lm_head with --quantize-lm-head), streamed weight by weight
// (io/quantize_model.h). Prints the compute path, one line per quantized weight with its relative RMS error, the total,
// and time and peak RSS at the end. OUT is a directory (model.dat + config.json for dat), or one file for gguf (the
// tokenizer and chat template in its metadata; --gguf-type q4_0 / q8_0 / f16 / bf16 encode the source values instead of
// NVFP4); it is never overwritten without --overwrite.
// --calibrate FILE first runs the source model (unquantized, as ModelOpt calibrates) over up to --calibrate-tokens
// tokens of FILE on --device and writes input_scale = amax / (6 * 448) of each linear's input (train/calibrate.h);
// without it the export is weight-only (quant_algo W4A16_NVFP4, no input_scale; io/modelopt.h), and the log says so.
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "cli/progress_bar.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/memory.h"
#include "io/gguf_model_writer.h"
#include "io/model_files.h"
#include "io/model_formats.h"
#include "io/model_writer.h"
#include "io/quantize_model.h"
#include "train/calibrate.h"
#include "train/metrics.h"
#include "train/train_options.h"

namespace nvfp4lm::cli {
namespace {

struct QuantizeCliOptions {
  std::string model;
  std::string out;
  std::string format;
  std::string gguf_type;
  std::string block = "1d";
  std::string config;
  bool quantize_lm_head = false;
  bool overwrite = false;
  uint64_t max_shard_mb = kDefaultMaxShardBytes / 1000000;
  std::string calibrate;
  int64_t calibrate_tokens = kDefaultCalibrationTokens;
  std::string tokenizer;
  DeviceFlags device;
};

// The activation calibration of --calibrate, with its header line and a progress bar.
ActivationCalibration calibrate(const QuantizeCliOptions& cli, const ModelFiles& source) {
  CalibrationOptions options;
  options.data = cli.calibrate;
  options.max_tokens = cli.calibrate_tokens;
  options.device = setup_device(cli.device);
  print_header("quantize --calibrate", options.device, options.device.is_cpu() ? "cpu/dense" : "cuda/dense-bf16",
               options.device.is_cpu() ? "fp32 (the source weights, unquantized)"
                                       : "bf16 activations, fp32 accumulation (the source weights, unquantized)");
  NVFP4LM_CHECK(!cli.tokenizer.empty() || source.tokenizer_dir(),
                "--calibrate: the model {} has no tokenizer.json beside it; name one with --tokenizer DIR",
                source.path().string());
  const Tokenizer tokenizer =
      Tokenizer::load(cli.tokenizer.empty() ? *source.tokenizer_dir() : fs::path(cli.tokenizer));
  ProgressBar bar("calibrate", "tokens", stderr_is_terminal());
  const auto start = std::chrono::steady_clock::now();
  ActivationCalibration calibration =
      calibrate_source_model(source, tokenizer, options, [&](int64_t done, int64_t total) {
        bar.update(done, total, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      });
  bar.finish();
  log::info("calibrated the input ranges of {} linears over {} tokens of {}", calibration.input_amax.size(),
            calibration.tokens, cli.calibrate);
  return calibration;
}

int run_quantize(const QuantizeCliOptions& cli) {
  QuantizeOptions options;
  // --format, --gguf-type and --block were checked while parsing (the flag table below).
  options.format = cli.format == "dat"                  ? ModelFormat::Dat
                   : cli.format == "gguf"               ? ModelFormat::Gguf
                   : cli.format == "compressed-tensors" ? ModelFormat::CompressedTensorsNvfp4
                                                        : ModelFormat::ModeloptNvfp4;
  if (!cli.gguf_type.empty()) {
    NVFP4LM_CHECK(options.format == ModelFormat::Gguf, "--gguf-type chooses the tensor type of --format gguf");
    options.gguf_type = parse_gguf_type(cli.gguf_type);
  }
  options.block = parse_block_flag(cli.block);
  options.quantize_lm_head = cli.quantize_lm_head;
  options.overwrite = cli.overwrite;
  options.max_shard_bytes = cli.max_shard_mb * 1000000;

  log::info("compute path: cpu/quantize (NVFP4 {} blocks, round to nearest even)",
            options.block == Nvfp4Block::Tile16x16 ? "16x16" : "1x16");
  const auto start = std::chrono::steady_clock::now();
  OpenModelOptions open_options;
  if (!cli.config.empty()) open_options.config_path = cli.config;
  const auto source = open_model(cli.model, open_options);
  log::info("source: {} ({}), {} weights", source->path().string(), model_format_name(source->format()),
            source->weights().size());
  NVFP4LM_CHECK(!cli.calibrate.empty() ||
                    (cli.device.device == "cpu" && (cli.tokenizer.empty() || options.format == ModelFormat::Gguf)),
                "--device and --tokenizer choose where and with what --calibrate runs (and --tokenizer what a gguf "
                "file embeds); quantizing itself runs on the CPU: add --calibrate FILE, or drop them");
  if (options.format == ModelFormat::Gguf && !cli.tokenizer.empty()) options.tokenizer_dir = cli.tokenizer;
  NVFP4LM_CHECK(cli.calibrate.empty() || format_capabilities(options.format).activation_scales,
                "--calibrate measures activation scales for the input scales of the ModelOpt and compressed-tensors "
                "formats; --format {} stores none: use --format modelopt or compressed-tensors, or leave out "
                "--calibrate",
                cli.format);
  if (!cli.calibrate.empty()) {
    // Before the calibration run, not after it: OUT may not exist or lie in what is read.
    guard_output(cli.out, "the output", {{source->path(), "the source model"}, {cli.calibrate, "--calibrate"}},
                 cli.overwrite, model_output_kind(options.format));
    options.calibration = calibrate(cli, *source);
  }
  const QuantizeReport report = quantize_model(*source, cli.out, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::string text =
      fmt::format("{:<48} {:<14} {:>13} {:>10}  {}\n", "weight", "shape", "tensor scale", "rel RMS", "action");
  for (const auto& weight : report.weights)
    text += fmt::format("{:<48} {:<14} {:>13.6g} {:>10.5f}  {}\n", weight.name, weight.shape.str(), weight.tensor_scale,
                        weight.relative_rms_error, weight.action);
  text += fmt::format("total relative RMS error {:.5f} over {} NVFP4 parameters ({} kept dense)\n",
                      report.total_relative_rms_error, report.nvfp4_parameters, report.dense_parameters);
  if (report.lm_head_untied)
    text += "lm_head: written as its own NVFP4 tensor; tie_word_embeddings set to false in config.json\n";
  if (options.format == ModelFormat::Gguf) {
    text += fmt::format("wrote {} (gguf, {} projections, {:.1f} MiB, tokenizer and chat template in the metadata)\n",
                        cli.out, gguf::ggml_type_name(options.gguf_type), to_mib(report.weight_bytes_written));
  } else {
    text += fmt::format("wrote {} ({} format, {:.1f} MiB of weights{}{})\n", cli.out, cli.format,
                        to_mib(report.weight_bytes_written), report.copied_files.empty() ? "" : ", copied ",
                        fmt::join(report.copied_files, ", "));
  }
  text += fmt::format("time {:.1f} s, peak RSS {:.2f} GiB\n", seconds, to_gib(peak_rss_bytes()));
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

CommandRegistration quantize_registration(
    "quantize", "Quantize a BF16/FP16/FP32 model to NVFP4 (.dat, ModelOpt safetensors or GGUF)",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<QuantizeCliOptions>();
      add_flags(
          app,
          {
              FlagUse({.name = "model",
                       .help = "source model: HF directory, ModelOpt or compressed-tensors directory, or .dat file"},
                      options->model)
                  .required(),
              FlagUse({.name = "out", .help = "output directory"}, options->out).required(),
              FlagUse({.name = "--format",
                       .help = "dat, modelopt, compressed-tensors (llm-compressor's NVFP4 layout), or gguf (one "
                               "file for llama.cpp)",
                       .value = one_of({"dat", "modelopt", "compressed-tensors", "gguf"})},
                      options->format)
                  .required(),
              FlagUse(rows::gguf_type(), options->gguf_type),
              FlagUse(rows::quantize_lm_head(), options->quantize_lm_head,
                      "quantize lm_head too (a tied one becomes a separate NVFP4 tensor)"),
              FlagUse(rows::block(), options->block),
              FlagUse(rows::overwrite(), options->overwrite),
              FlagUse(rows::config(), options->config),
              FlagUse(rows::max_shard_mb(), options->max_shard_mb,
                      "modelopt, compressed-tensors: largest safetensors shard in MB (default 4000)"),
              FlagUse(rows::calibrate(), options->calibrate),
              FlagUse(rows::calibrate_tokens(), options->calibrate_tokens),
              FlagUse(rows::tokenizer(), options->tokenizer,
                      "--calibrate, gguf: tokenizer directory (default: the model's)"),
          });
      add_flags(app, device_flags(options->device));
      return [options] { return run_quantize(*options); };
    },
    30);

}  // namespace
}  // namespace nvfp4lm::cli
