// See calibrate.h.
#include "train/calibrate.h"

#include <algorithm>

#include "core/error.h"
#include "data/batch.h"
#include "io/model_formats.h"
#include "tokenizer/chat_template.h"
#include "train/checkpoint.h"
#include "train/tensor_model_files.h"

namespace nvfp4lm {

ActivationCalibration calibrate_activations(Qwen3Trainable& model, const Tokenizer& tokenizer,
                                            const CalibrationOptions& options, const std::string& command,
                                            const CalibrationProgressFn& progress) {
  NVFP4LM_CHECK(options.max_tokens >= 1, "--calibrate-tokens must be at least 1, got {}", options.max_tokens);
  DatasetOptions data_options;
  data_options.format = options.data_format;
  data_options.chat_template = ChatTemplate::resolve(tokenizer, options.chat_template);
  data_options.train_on_everything = true;
  data_options.max_tokens = std::max<int64_t>(2, std::min(options.seq_len, model.config().max_position_embeddings));
  data_options.goal = "calibrate with";
  data_options.token_budget = options.max_tokens;  // tokenize only what runs
  Dataset dataset = read_dataset(options.data, tokenizer, data_options);

  // The samples that fill max_tokens, the last one cut.
  std::vector<Sample> samples;
  int64_t total = 0;
  for (Sample& sample : dataset.samples) {
    if (total >= options.max_tokens) break;
    const int64_t take = std::min<int64_t>(static_cast<int64_t>(sample.ids.size()), options.max_tokens - total);
    sample.ids.resize(static_cast<size_t>(take));
    sample.train_mask.resize(static_cast<size_t>(take));
    total += take;
    samples.push_back(std::move(sample));
  }

  ActivationCalibration calibration;
  calibration.source = fmt::format("{} {}", command, options.data.string());
  model.set_calibration(&calibration);
  try {
    int64_t done = 0;
    for (size_t i = 0; i < samples.size(); ++i) {
      const auto length = static_cast<int64_t>(samples[i].ids.size());
      const TokenBatch batch = assemble_batch(samples, {{static_cast<int64_t>(i)}}, length, /*pad_id=*/0);
      model.evaluate({batch.ids, batch.targets, batch.positions, batch.segment_ids, {}});
      done += length;
      if (progress) progress(done, total);
    }
  } catch (...) {
    model.set_calibration(nullptr);
    throw;
  }
  model.set_calibration(nullptr);
  if (total < options.max_tokens)
    calibration.source +=
        fmt::format(" (all {} tokens of it; --calibrate-tokens asked for {})", total, options.max_tokens);
  return calibration;
}

namespace {

// A forward-only model (nothing trained, so no gradients are allocated).
Qwen3Trainable forward_model(const ModelFiles& files, TrainModelOptions options) {
  options.train_last_layers = 0;
  return Qwen3Trainable::from_files(files, options);
}

}  // namespace

ActivationCalibration calibrate_source_model(const ModelFiles& source, const Tokenizer& tokenizer,
                                             const CalibrationOptions& options, const CalibrationProgressFn& progress) {
  TrainModelOptions forward;
  forward.qat = QatMode::Off;
  forward.device = options.device;
  Qwen3Trainable model = forward_model(source, forward);
  return calibrate_activations(model, tokenizer, options, "quantize --calibrate", progress);
}

ActivationCalibration calibrate_checkpoint(const CheckpointExportInput& input, const ExportOptions& export_options,
                                           const CalibrationOptions& options, const CalibrationProgressFn& progress) {
  NVFP4LM_CHECK(format_capabilities(export_options.format).activation_scales,
                "--calibrate measures activation scales for the input scales of the ModelOpt and compressed-tensors "
                "formats; --format {} stores none: use --format modelopt or compressed-tensors, or leave out "
                "--calibrate",
                export_format_flag_name(export_options.format));
  std::optional<fs::path> tokenizer_dir;
  for (const fs::path& file : input.source.side_files)
    if (file.filename() == "tokenizer.json") tokenizer_dir = file.parent_path();
  NVFP4LM_CHECK(tokenizer_dir.has_value(),
                "--calibrate: checkpoint {} has no tokenizer (neither the run's {} copy nor the source model has "
                "tokenizer.json), so the calibration text cannot be tokenized",
                input.checkpoint.string(), kSourceModelDirName);
  const Tokenizer tokenizer = Tokenizer::load(*tokenizer_dir);
  const std::vector<NamedTensor> masters = load_checkpoint_masters(input);
  const std::unique_ptr<ModelFiles> files =
      tensor_model_files(input.source.config_json, masters, "checkpoint " + input.checkpoint.string());
  TrainModelOptions forward;
  forward.qat = input.run_options.qat == QatMode::W4A4 ? QatMode::W4A4 : QatMode::W4A16;
  forward.block = export_options.block;
  forward.quantize_lm_head = export_options.quantize_lm_head;
  forward.device = options.device;
  Qwen3Trainable model = forward_model(*files, forward);
  return calibrate_activations(model, tokenizer, options, "export --calibrate", progress);
}

}  // namespace nvfp4lm
