// See merge_qat.h.
#include "train/merge_qat.h"

#include <optional>
#include <set>

#include "core/error.h"
#include "core/logging.h"
#include "io/model_formats.h"
#include "io/model_writer.h"

namespace nvfp4lm {

fs::path merge_qat_run_dir(const CheckpointExportInput& input, const MergeQatOptions& options) {
  if (!options.run_dir.empty()) return options.run_dir;
  return input.checkpoint.parent_path() / "merge-qat";
}

fs::path merge_qat_start_dir(const fs::path& run_dir) {
  return run_dir.parent_path() / (run_dir.filename().string() + "-start");
}

TrainOptions merge_qat_train_options(const TrainOptions& lora_run, const fs::path& start_model, const fs::path& run_dir,
                                     const fs::path& out, const ExportOptions& export_options,
                                     const MergeQatOptions& options) {
  NVFP4LM_CHECK(options.steps > 0, "--qat-steps must be positive, got {}", options.steps);
  NVFP4LM_CHECK(options.lr > 0, "--qat-lr must be positive, got {}", options.lr);
  const FormatCapabilities& format = format_capabilities(export_options.format, export_options.gguf_type);
  NVFP4LM_CHECK(format.nvfp4_weights,
                "--qat-steps recovers what re-quantizing the merge to NVFP4 loses; --format {} holds no NVFP4 "
                "weights: drop --qat-steps (the merge is exported as it is)",
                export_format_flag_name(export_options.format));
  NVFP4LM_CHECK(export_options.format != ModelFormat::Gguf || export_options.gguf_type == gguf::GgmlType::NVFP4,
                "--qat-steps exports the trained NVFP4 weights: drop --gguf-type or use --gguf-type nvfp4");
  NVFP4LM_CHECK(!export_options.dense_dtype,
                "--qat-steps exports as `train --export` does, with the dense weights in the start model's dtype "
                "(F32): drop --dtype, or re-export the QAT run's checkpoint with `nvfp4lm export DIR OUT --dtype ...`");
  TrainOptions run = lora_run;
  run.model = start_model.string();
  run.synthetic = false;
  run.max_layers = 0;
  run.lora_rank = 0;
  run.lora_alpha = 0;
  run.lora_dropout = 0;
  run.lora_targets = "all";
  run.train_last_layers = -1;  // every weight: the merge moved the adapted layers, QAT re-fits all of them
  if (run.qat == QatMode::Off) run.qat = QatMode::W4A16;
  run.block = export_options.block;
  run.quantize_lm_head = export_options.quantize_lm_head;
  run.epochs = 1;
  run.max_steps = options.steps;
  run.steps_per_epoch = 0;
  run.lr = options.lr;
  run.lr_schedule = LrDecay::Cosine;
  run.warmup = 0;
  run.min_lr_ratio = 0;
  run.output = run_dir.string();
  run.save_every = 0;
  run.resume_mode = ResumeMode::Never;
  run.resume = false;
  run.export_path = out.string();
  run.output_dat.clear();
  run.export_format = export_options.format;
  run.overwrite = export_options.overwrite;
  run.device = options.device;
  run.max_memory_gib = options.max_memory_gib;
  run.metrics.clear();
  run.memory_report.clear();
  run.eval_every = 0;
  run.save_best = false;
  run.calibrate_steps = 0;
  validate_train_options(run);
  return run;
}

namespace {

// The merge as an HF safetensors model in F32 (ModelWriter: config.json without quantization_config, the side files).
void write_start_model(std::span<const NamedTensor> merged, const ExportSource& source, const fs::path& dir) {
  std::vector<WeightPlan> plan;
  for (const NamedTensor& weight : merged) plan.push_back({weight.name, weight.tensor.shape(), false, DType::F32});
  ModelWriterOptions writer_options;
  writer_options.config_json = source.config_json;
  writer_options.config_json["torch_dtype"] = "float32";
  writer_options.generation_config = source.generation_config;
  for (const fs::path& file : source.side_files) {
    const std::string name = file.filename().string();
    if (name != "config.json" && name != "generation_config.json") writer_options.copy_files.push_back(file);
  }
  ModelWriter writer(ModelFormat::HfSafetensors, dir, std::move(plan), writer_options);
  for (const NamedTensor& weight : merged) {
    const std::vector<float> values = to_float_vector(weight.tensor);
    writer.write_dense_bytes(weight.name, values.data(), values.size() * sizeof(float));
  }
  writer.finish();
}

}  // namespace

MergeQatResult recover_merge_with_qat(const CheckpointExportInput& input, std::span<const NamedTensor> merged,
                                      const fs::path& out, const ExportOptions& export_options,
                                      const MergeQatOptions& options, const MergeQatTrain& train) {
  MergeQatResult result;
  result.run_dir = merge_qat_run_dir(input, options);
  result.start_model = merge_qat_start_dir(result.run_dir);
  TrainOptions run =
      merge_qat_train_options(input.run_options, result.start_model, result.run_dir, out, export_options, options);
  // The start model carries the checkpoint's copy of the run's tokenizer, when it has one (the path the LoRA run read
  // it from may be gone).
  for (const fs::path& file : input.source.side_files)
    if (file.filename() == "tokenizer.json") run.tokenizer.clear();
  std::error_code ec;
  NVFP4LM_CHECK(!fs::exists(result.run_dir, ec),
                "the QAT run directory {} exists (an earlier --qat-steps?): continue it with `nvfp4lm train --resume "
                "--output {}`, or choose another with --qat-output",
                result.run_dir.string(), result.run_dir.string());
  NVFP4LM_CHECK(!fs::exists(result.start_model, ec),
                "{} exists (the start model of an earlier --qat-steps?): remove it, or choose another --qat-output",
                result.start_model.string());
  check_export_target(out, input.source, export_options.overwrite, model_output_kind(export_options.format));

  write_start_model(merged, input.source, result.start_model);
  log::info("wrote the merge as the F32 start model {}; {} steps of full-parameter QAT ({}) from it in {}",
            result.start_model.string(), options.steps, qat_mode_name(run.qat), result.run_dir.string());
  std::optional<Trainer> trainer;
  {
    const QuietInfoLogs quiet;  // the loaders' info lines repeat what the set-up lines say
    trainer.emplace(run, std::set<std::string>{});
  }
  result.summary = train ? train(*trainer) : trainer->run();
  return result;
}

}  // namespace nvfp4lm
