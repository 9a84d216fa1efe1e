// `nvfp4lm export CHECKPOINT_DIR|RUN_DIR OUT [--format modelopt|compressed-tensors|dat|bf16|gguf] [--gguf-type T]`: a
// training checkpoint (or a run directory's newest complete one) as a model directory (train/export.h). The NVFP4 block
// shape and lm_head quantization default to the run's own (what QAT trained); --block / --quantize-lm-head override
// them. Input scales (ModelOpt, compressed-tensors): --calibrate FILE measures the export's own forward (the quantized
// masters) over up to
// --calibrate-tokens tokens on --device (train/calibrate.h); else the ranges the run recorded with
// --calibrate-steps, when it did; else the export is weight-only, quant_algo W4A16_NVFP4 (io/modelopt.h).
// A LoRA run's checkpoint exports its adapter (PEFT), or with --merge-lora the base with the adapters merged
// (train/lora_merge.h), and with --qat-steps N that merge trained N steps with full-parameter QAT first
// (train/merge_qat.h).
// `export MODEL OUT --format bf16|dense-dat [--dtype D]` (MODEL any model, NVFP4 ones dequantized) and `--format
// dense-dat` of a checkpoint write a dense copy (train/dense_export.h): a base PEFT and transformers load, or the F#
// predecessor's dense `.dat` (its step 1) that `quantize --format dat` turns into its NVFP4 one.
#include <chrono>
#include <memory>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "cli/progress_bar.h"
#include "core/error.h"
#include "core/logging.h"
#include "io/gguf_model_writer.h"
#include "io/model_files.h"
#include "io/model_formats.h"
#include "io/model_writer.h"
#include "train/calibrate.h"
#include "train/dense_export.h"
#include "train/export.h"
#include "train/lora_merge.h"
#include "train/merge_qat.h"
#include "train/metrics.h"
#include "train/tensor_model_files.h"
#include "train/train_options.h"
#include "train/train_setup.h"

namespace nvfp4lm::cli {
namespace {

struct ExportCliOptions {
  std::string input;
  std::string out;
  std::string format = "modelopt";
  std::string gguf_type;
  std::string block;
  bool quantize_lm_head = false;
  std::string dtype;
  bool overwrite = false;
  bool merge_lora = false;
  int64_t qat_steps = 0;
  double qat_lr = MergeQatOptions{}.lr;
  std::string qat_output;
  std::string calibrate;
  int64_t calibrate_tokens = kDefaultCalibrationTokens;
  DeviceFlags device;
};

DType parse_dense_dtype(const std::string& name) {
  if (name == "bf16") return DType::BF16;
  if (name == "f32" || name == "fp32") return DType::F32;
  if (name == "f16" || name == "fp16") return DType::F16;
  NVFP4LM_FAIL("unknown --dtype '{}' (choose bf16, f32 or f16)", name);
}

// --format dense-dat: the F# predecessor's dense `.dat` (train/dense_export.h); not a ModelFormat of its own, since
// the `.dat` format holds both (the other --format values are parse_export_format's).
constexpr std::string_view kDenseDatFormat = "dense-dat";

void check_format_flag(const std::string& text) {
  if (text != kDenseDatFormat) parse_export_format(text);
}

// Whether `path` is a model (a .dat or .gguf file, a directory with config.json) rather than a checkpoint or a run
// directory (whose config lives in trainer_state.json and source-model/).
bool is_model_input(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return true;
  return fs::is_regular_file(path / "config.json", ec) && !fs::exists(path / kTrainerStateFileName, ec);
}

DenseExportOptions dense_options(const ExportCliOptions& cli) {
  DenseExportOptions options;
  options.format = cli.format == kDenseDatFormat ? ModelFormat::Dat : ModelFormat::HfSafetensors;
  if (!cli.dtype.empty()) options.dtype = parse_dense_dtype(cli.dtype);
  if (options.format == ModelFormat::HfSafetensors) options.dtype = DType::BF16;
  options.overwrite = cli.overwrite;
  return options;
}

// A dense copy takes --format, --dtype and --overwrite only.
bool only_dense_copy_flags(const ExportCliOptions& cli) {
  return cli.gguf_type.empty() && cli.block.empty() && !cli.quantize_lm_head && !cli.merge_lora && cli.qat_steps == 0 &&
         cli.calibrate.empty() && cli.device.device == "cpu";
}

// The dense copy of `model` (train/dense_export.h) to cli.out, logged; `what` names the source in the warning.
int write_dense_copy(const ExportCliOptions& cli, const ModelFiles& model, const ExportSource& source,
                     const std::string& what) {
  const ExportReport report = export_dense_model(model, source, cli.out, dense_options(cli));
  log::info("{}", describe_export(report));
  if (report.rounded_values > 0)
    log::warn("{} values did not fit {} exactly and were rounded: the copy computes nearly, not exactly, what {} does",
              report.rounded_values, dtype_name(report.dense_dtype), what);
  return 0;
}

// `export MODEL OUT --format bf16|dense-dat`: a dense copy of a model (train/dense_export.h).
int run_model_export(const ExportCliOptions& cli) {
  NVFP4LM_CHECK(cli.format == "bf16" || cli.format == kDenseDatFormat,
                "{} is a model, not a checkpoint: export writes a dense copy of it (--format bf16 or dense-dat); "
                "`nvfp4lm quantize {} OUT --format {}` makes an NVFP4 one",
                cli.input, cli.input, cli.format);
  NVFP4LM_CHECK(only_dense_copy_flags(cli),
                "{} is a model: its dense copy takes --format, --dtype and --overwrite only (--gguf-type, --block, "
                "--quantize-lm-head, --merge-lora, --qat-steps, --calibrate and --device are for checkpoints)",
                cli.input);
  NVFP4LM_CHECK(cli.format != "bf16" || cli.dtype.empty() || cli.dtype == "bf16",
                "--format bf16 writes every weight as BF16; --format dense-dat --dtype {} writes another dtype",
                cli.dtype);
  const auto model = open_model(cli.input);
  log::info("exporting {} ({}, {} weights) as a dense copy, on the CPU", model->path().string(),
            model_format_name(model->format()), model->weights().size());
  return write_dense_copy(cli, *model, model_export_source(*model), cli.input);
}

// --merge-lora --qat-steps N (train/merge_qat.h): the merge trained with QAT, then exported, with train's header,
// set-up lines and progress.
int run_merge_qat(const ExportCliOptions& cli, const CheckpointExportInput& input, const MergedModel& merged,
                  const ExportOptions& options) {
  MergeQatOptions qat;
  qat.steps = cli.qat_steps;
  qat.lr = cli.qat_lr;
  qat.run_dir = cli.qat_output;
  qat.device = cli.device.device;
  qat.max_memory_gib = cli.device.max_memory_gib;
  const MergeQatResult result = recover_merge_with_qat(
      input, merged.masters, cli.out, options, qat,
      [](Trainer& trainer) { return run_training_shown("export --merge-lora --qat-steps", trainer); });
  log::info(
      "the merge's start model {} and the QAT run {} are kept: `nvfp4lm train --resume --output {} --max-steps M` "
      "trains it further; remove both when done",
      result.start_model.string(), result.run_dir.string(), result.run_dir.string());
  return 0;
}

int run_export(const ExportCliOptions& cli) {
  NVFP4LM_CHECK(cli.qat_steps == 0 || cli.merge_lora,
                "--qat-steps trains the merge of a LoRA run's adapters: add --merge-lora (a full-parameter run's "
                "checkpoint is already QAT-trained)");
  NVFP4LM_CHECK(cli.qat_steps > 0 || (cli.qat_output.empty() && cli.qat_lr == MergeQatOptions{}.lr),
                "--qat-lr and --qat-output go with --qat-steps N");
  if (is_model_input(cli.input)) return run_model_export(cli);
  if (cli.format == kDenseDatFormat) {
    NVFP4LM_CHECK(only_dense_copy_flags(cli),
                  "--format dense-dat writes the checkpoint's masters densely: --gguf-type, --block, "
                  "--quantize-lm-head, --merge-lora, --calibrate and --device do not apply");
    const CheckpointExportInput input = open_checkpoint_for_export(cli.input);
    NVFP4LM_CHECK(input.run_options.lora_rank == 0,
                  "{} is a LoRA run's checkpoint: export its merge first (--merge-lora --format bf16), then that "
                  "directory with --format dense-dat",
                  input.checkpoint.string());
    const std::vector<NamedTensor> masters = load_checkpoint_masters(input);
    const auto model = tensor_model_files(input.source.config_json, masters, "checkpoint " + input.checkpoint.string());
    log::info("exporting checkpoint {} (step {}) as a dense .dat", input.checkpoint.string(), input.step);
    return write_dense_copy(cli, *model, input.source, "checkpoint " + input.checkpoint.string());
  }
  ExportOptions options;
  options.format = parse_export_format(cli.format);  // --format, --dtype, --gguf-type, --block: checked while parsing
  if (!cli.dtype.empty()) {
    NVFP4LM_CHECK(options.format != ModelFormat::HfSafetensors,
                  "--dtype sets the dense weights of the NVFP4 formats; --format bf16 writes everything as BF16");
    options.dense_dtype = parse_dense_dtype(cli.dtype);
  }
  if (!cli.gguf_type.empty()) {
    NVFP4LM_CHECK(options.format == ModelFormat::Gguf, "--gguf-type chooses the tensor type of --format gguf");
    options.gguf_type = parse_gguf_type(cli.gguf_type);
  }
  options.overwrite = cli.overwrite;
  const CheckpointExportInput input = open_checkpoint_for_export(cli.input);
  std::optional<MergedModel> merged;
  std::unique_ptr<ModelFiles> base;
  if (input.run_options.lora_rank > 0 && !cli.merge_lora) {
    // A LoRA run's checkpoint holds its adapters, not a model: the export is the adapter in PEFT's format.
    NVFP4LM_CHECK(cli.format == "modelopt" && cli.dtype.empty() && cli.gguf_type.empty() && cli.block.empty() &&
                      !cli.quantize_lm_head && cli.calibrate.empty(),
                  "{} is a LoRA run's checkpoint (--lora {}): its export is the adapter in PEFT's format, without "
                  "--format, --dtype, --gguf-type, --block, --quantize-lm-head or --calibrate; add --merge-lora for a "
                  "whole model with the adapters merged into the base",
                  input.checkpoint.string(), input.run_options.lora_rank);
    log::info("exporting the LoRA adapter of checkpoint {} (step {}, rank {}) as PEFT", input.checkpoint.string(),
              input.step, input.run_options.lora_rank);
    const ExportReport report = export_lora_adapter(
        load_checkpoint_masters(input), input.run_options,
        parse_qwen3_config(input.source.config_json, input.checkpoint.string() + " (the run's model config)"),
        input.source, cli.out, cli.overwrite);
    log::info("{}", describe_export(report));
    return 0;
  }
  if (cli.merge_lora) {
    NVFP4LM_CHECK(input.run_options.lora_rank > 0,
                  "--merge-lora merges a LoRA run's adapters; {} is a full-parameter run's checkpoint: drop it",
                  input.checkpoint.string());
    NVFP4LM_CHECK(cli.calibrate.empty(),
                  "--calibrate measures a checkpoint's own weights; with --merge-lora export the merge first (--format "
                  "bf16), then `nvfp4lm quantize MERGED OUT --format modelopt --calibrate FILE`");
    check_checkpoint_export_target(input, cli.out, options);  // before the merge's work
    base = open_training_model(input.run_options);
    log::info("merging the rank-{} adapters of {} (step {}) into {}", input.run_options.lora_rank,
              input.checkpoint.string(), input.step, base->path().string());
    merged = merge_lora_adapters(*base, load_checkpoint_masters(input), input.run_options);
    if (options.format != ModelFormat::HfSafetensors && cli.qat_steps == 0)
      log::warn(
          "{} merged linears are quantized to NVFP4 again: the export approximates base + adapters (measure it "
          "with `nvfp4lm eval --reference` against a --format bf16 merge)",
          merged->merged_linears);
  }
  options.block = cli.block.empty() ? input.run_options.block : parse_block_flag(cli.block);
  options.quantize_lm_head = cli.quantize_lm_head || input.run_options.quantize_lm_head;
  if (options.format != ModelFormat::HfSafetensors && input.run_options.qat != QatMode::Off &&
      (options.block != input.run_options.block || options.quantize_lm_head != input.run_options.quantize_lm_head))
    log::warn(
        "exporting with other NVFP4 settings than the run trained with (--block {}, lm_head {}): the export "
        "will not compute exactly what training did",
        block_flag_name(options.block), options.quantize_lm_head ? "quantized" : "unquantized");
  if (cli.qat_steps > 0) return run_merge_qat(cli, input, *merged, options);
  log::info("exporting checkpoint {} (step {}, QAT {}, {} blocks) as {}", input.checkpoint.string(), input.step,
            qat_mode_name(input.run_options.qat), block_flag_name(input.run_options.block),
            export_format_flag_name(options.format));
  NVFP4LM_CHECK(!cli.calibrate.empty() || cli.device.device == "cpu",
                "--device chooses where --calibrate (or --qat-steps) runs; exporting itself runs on the CPU: add "
                "--calibrate FILE, or drop --device");
  if (!cli.calibrate.empty()) {
    check_export_target(cli.out, input.source, options.overwrite,
                        model_output_kind(options.format));  // before the calibration run
    CalibrationOptions calibration;
    calibration.data = cli.calibrate;
    calibration.max_tokens = cli.calibrate_tokens;
    calibration.device = setup_device(cli.device);
    print_header("export --calibrate", calibration.device,
                 fmt::format("{}/dequant-gemm", calibration.device.is_cpu() ? "cpu" : "cuda"),
                 calibration.device.is_cpu() ? "fp32 (the exported NVFP4 weights)"
                                             : "bf16 activations, fp32 accumulation (the exported NVFP4 weights)");
    ProgressBar bar("calibrate", "tokens", stderr_is_terminal());
    const auto start = std::chrono::steady_clock::now();
    options.calibration = calibrate_checkpoint(input, options, calibration, [&](int64_t done, int64_t total) {
      bar.update(done, total, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    });
    bar.finish();
    log::info("calibrated the input ranges of {} linears over {} tokens of {}", options.calibration->input_amax.size(),
              options.calibration->tokens, cli.calibrate);
  } else if (input.recorded_calibration && format_capabilities(options.format).activation_scales) {
    options.calibration = input.recorded_calibration;
    log::info("activation scales: recorded by the run ({}, {} tokens)", options.calibration->source,
              options.calibration->tokens);
  }
  const ExportReport report =
      merged ? export_checkpoint(input, cli.out, options, std::span<const NamedTensor>(merged->masters))
             : export_checkpoint(input, cli.out, options);
  log::info("{}", describe_export(report));
  return 0;
}

CommandRegistration export_registration(
    "export",
    "Export a training checkpoint as NVFP4 (ModelOpt safetensors or .dat), BF16 safetensors or a dense .dat; or a "
    "model as a dense copy",
    [](CLI::App& app) -> CommandRun {
      auto cli = std::make_shared<ExportCliOptions>();
      add_flags(
          app,
          {
              FlagUse({.name = "checkpoint",
                       .help = "checkpoint directory (step-N), run directory (its newest), or a model (HF or ModelOpt "
                               "directory, .dat) for a dense copy (--format bf16 or dense-dat)"},
                      cli->input)
                  .required(),
              FlagUse({.name = "out",
                       .help = "output model directory (with --format dat, a name ending in .dat writes that one file, "
                               "with config.json and the tokenizer beside it)"},
                      cli->out)
                  .required(),
              FlagUse(
                  {.name = "--format",
                   .help = "modelopt (NVFP4 safetensors, default), compressed-tensors (NVFP4 safetensors as "
                           "llm-compressor writes them), dat (NVFP4 .dat), bf16 (dense safetensors), dense-dat (the "
                           "predecessor's dense .dat, --dtype), or gguf (one file for llama.cpp)",
                   .value = FlagChoice{check_format_flag}},
                  cli->format),
              FlagUse(rows::gguf_type(), cli->gguf_type,
                      "gguf: nvfp4 (default: the trained NVFP4 weights bit for bit), q4_0, q8_0, f16 or bf16"),
              FlagUse(rows::block(), cli->block, "NVFP4 blocks: 1d or 2d (default: the run's)"),
              FlagUse(rows::quantize_lm_head(), cli->quantize_lm_head, "quantize lm_head (default: as the run did)"),
              FlagUse({.name = "--dtype",
                       .help = "dense weights of NVFP4 exports, every weight of dense-dat: bf16, f32 or f16 (default: "
                               "the model's torch_dtype)",
                       .value = FlagChoice{[](const std::string& text) { parse_dense_dtype(text); }}},
                      cli->dtype),
              FlagUse(rows::overwrite(), cli->overwrite, "replace an existing output directory"),
              FlagUse({.name = "--merge-lora",
                       .help = "a LoRA run: merge its adapters into the base and export the whole model (default: the "
                               "adapter alone, in PEFT's format)",
                       .value = FlagSwitch{}},
                      cli->merge_lora),
              FlagUse({.name = "--qat-steps",
                       .help = "with --merge-lora and an NVFP4 format: train the merge N steps with full-parameter QAT "
                               "on the LoRA run's data before exporting, to recover what re-quantizing the merged "
                               "weights loses (the start model and the QAT run are kept: --qat-output)",
                       .value = FlagNumber<int64_t>{{1, int64_t{1} << 30}}},
                      cli->qat_steps),
              FlagUse({.name = "--qat-lr",
                       .help = "--qat-steps: peak learning rate, cosine to 0 (default 1e-5)",
                       .value = FlagNumber<double>{{1e-12, 1.0}}},
                      cli->qat_lr),
              FlagUse({.name = "--qat-output",
                       .help = "--qat-steps: the QAT run's directory (default: RUN/merge-qat; its start model, the "
                               "merge in F32, beside it as DIR-start)"},
                      cli->qat_output),
              FlagUse(rows::calibrate(), cli->calibrate,
                      "modelopt, compressed-tensors: measure each linear's input range on this text with the "
                      "exported weights: a W4A4 export (input_scale = amax / (6*448)); without it the export is "
                      "weight-only (W4A16_NVFP4, NVFP4A16)"),
              FlagUse(rows::calibrate_tokens(), cli->calibrate_tokens),
          });
      add_flags(app, device_flags(cli->device));
      return [cli] { return run_export(*cli); };
    },
    35);

}  // namespace
}  // namespace nvfp4lm::cli
