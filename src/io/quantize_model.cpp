#include "io/quantize_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "core/error.h"
#include "core/logging.h"
#include "io/export_plan.h"
#include "io/model_formats.h"
#include "quant/nvfp4_fixed_scale.h"
#include "quant/nvfp4_group_scale.h"

namespace nvfp4lm {
namespace {

// What happens to each NVFP4 output weight.
struct ScaleDecision {
  bool copy = false;          // keep the source's codes and scales
  float tensor_scale = 1.0f;  // otherwise quantize with this
};

Tensor dense_values(const ModelWeight& weight) {
  return weight.is_nvfp4() ? dequantize_nvfp4(weight.nvfp4, DType::F32) : weight.dense;
}

// Tensor scales per group: copy what the format can hold as it is, otherwise one scale per group (1 where the
// format stores none).
std::map<std::string, ScaleDecision> decide_scales(const ModelFiles& source, const ExportPlan& plan,
                                                   const FormatCapabilities& format) {
  std::map<std::string, std::vector<const PlannedWeight*>> groups;
  for (const auto& weight : plan.weights)
    if (weight.out.nvfp4) groups[weight.scale_group].push_back(&weight);
  std::map<std::string, ScaleDecision> decisions;
  for (const auto& [group, members] : groups) {
    ScaleDecision decision;
    // Already-NVFP4 members are copied when every member is, with tensor scales the format holds (and, where the
    // engines fuse the group, one common scale).
    bool all_nvfp4 = true, all_held = true;
    std::vector<float> scales;
    for (const PlannedWeight* member : members) {
      all_nvfp4 = all_nvfp4 && member->source_nvfp4;
      if (member->source_nvfp4) {
        const ModelWeight weight = source.load(member->source);
        scales.push_back(weight.nvfp4.tensor_scale);
        all_held = all_held && holds_tensor_scale(format, weight.nvfp4.tensor_scale);
      }
    }
    const bool one_scale =
        !scales.empty() && std::all_of(scales.begin(), scales.end(), [&](float s) { return s == scales.front(); });
    if (all_nvfp4 && all_held && (one_scale || !format.fused_groups_share_scale)) {
      decision.copy = true;
    } else if (!format.stores_tensor_scale) {
      decision.tensor_scale = 1.0f;
    } else {
      Nvfp4GroupScale scale;
      for (const PlannedWeight* member : members) {
        const ModelWeight weight = source.load(member->source);
        scale.add(dense_values(weight), source.path().string() + ": " + member->source);
        source.release(member->source);
      }
      decision.tensor_scale = scale.tensor_scale();
    }
    decisions[group] = decision;
  }
  return decisions;
}

// A W4A4 source (ModelOpt input_scale on its NVFP4 weights) re-exported without --calibrate: a ModelOpt output keeps
// the stored activation scales (they describe the layers' inputs, whatever happens to the weights), so it stays W4A4;
// other formats store none, and the log says the output runs W4A16.
std::optional<ActivationCalibration> kept_input_scales(const ModelFiles& source, const ExportPlan& plan,
                                                       ModelFormat format) {
  ActivationCalibration kept;
  kept.source = "kept from " + source.path().string();
  size_t nvfp4_outputs = 0;
  for (const PlannedWeight& weight : plan.weights) {
    if (!weight.out.nvfp4) continue;
    ++nvfp4_outputs;
    if (!weight.source_nvfp4) continue;
    if (const float input_scale = source.load(weight.source).input_scale; input_scale > 0)
      kept.stored_input_scale[weight.out.name] = input_scale;
    source.release(weight.source);
  }
  if (kept.stored_input_scale.empty()) return std::nullopt;
  const bool stores_scales = format_capabilities(format).activation_scales;
  if (!stores_scales || kept.stored_input_scale.size() != nvfp4_outputs) {
    log::warn(
        "{} is a W4A4 checkpoint (input_scale on {} weights); its activation scales are not written: {}, so the "
        "output runs W4A16 (pass --calibrate FILE for a W4A4 ModelOpt export)",
        source.path().string(), kept.stored_input_scale.size(),
        !stores_scales ? fmt::format("the {} format stores none", model_format_name(format))
                       : fmt::format("only {} of the output's {} NVFP4 weights have one",
                                     kept.stored_input_scale.size(), nvfp4_outputs));
    return std::nullopt;
  }
  log::info("{}: the W4A4 checkpoint's input_scale values are kept as stored ({} weights)", source.path().string(),
            nvfp4_outputs);
  return kept;
}

}  // namespace

std::vector<fs::path> model_side_files(const ModelFiles& source) {
  std::vector<fs::path> files;
  if (source.tokenizer_dir()) files = tokenizer_side_files(*source.tokenizer_dir());
  std::error_code ec;
  if (fs::is_regular_file(source.directory() / "generation_config.json", ec))
    files.push_back(source.directory() / "generation_config.json");
  return files;
}

std::vector<GuardedInput> model_read_paths(const ModelFiles& source) {
  std::vector<GuardedInput> inputs = {{source.path(), "the source model"},
                                      {source.config_path(), "the source model's config"}};
  if (!source.tokenizer_dir()) return inputs;
  if (source.format() != ModelFormat::Dat && source.format() != ModelFormat::Gguf) {
    inputs.push_back({*source.tokenizer_dir(), "the source model's tokenizer directory"});
    return inputs;
  }
  // A .dat's (or a GGUF's) tokenizer is its directory's, which may hold other models (the predecessor kept its FP16 and
  // NVFP4 .dat and their outputs in one): its files are read, not the whole directory.
  for (const fs::path& file : tokenizer_side_files(*source.tokenizer_dir()))
    inputs.push_back({file, "the source model's tokenizer file " + file.filename().string()});
  return inputs;
}

QuantizeReport quantize_model(const ModelFiles& source, const fs::path& out, const QuantizeOptions& options) {
  NVFP4LM_CHECK(options.format == ModelFormat::ModeloptNvfp4 || options.format == ModelFormat::CompressedTensorsNvfp4 ||
                    options.format == ModelFormat::Dat || options.format == ModelFormat::Gguf,
                "quantize writes the modelopt, compressed-tensors, dat or gguf format, not {}",
                model_format_name(options.format));
  const FormatCapabilities& format = format_capabilities(options.format, options.gguf_type);
  NVFP4LM_CHECK(!options.calibration || format.activation_scales,
                "--calibrate measures activation scales for the input scales of the ModelOpt and compressed-tensors "
                "formats; the {} format stores none: use --format modelopt or compressed-tensors, or leave out "
                "--calibrate",
                model_format_name(options.format));
  // Before the (long) amax pass, not only when writing starts: OUT may not be, hold or lie in what is read.
  guard_output(out, "the output", model_read_paths(source), options.overwrite, model_output_kind(options.format));

  QuantizeReport report;
  const ExportPlan plan = plan_export(
      source.weights(), source.config().tie_word_embeddings,
      {.format = format, .block = options.block, .quantize_lm_head = options.quantize_lm_head}, source.path().string());
  report.lm_head_untied = plan.lm_head_untied;
  const auto decisions = decide_scales(source, plan, format);

  ModelWriterOptions writer_options;
  writer_options.overwrite = options.overwrite;
  writer_options.max_shard_bytes = options.max_shard_bytes;
  writer_options.config_json = source.config_json();
  if (report.lm_head_untied) writer_options.config_json["tie_word_embeddings"] = false;
  writer_options.copy_files = model_side_files(source);
  writer_options.gguf_type = options.gguf_type;
  if (options.tokenizer_dir) {  // the tokenizer files of --tokenizer DIR instead of the model's
    std::erase_if(writer_options.copy_files,
                  [](const fs::path& file) { return file.filename() != "generation_config.json"; });
    for (const fs::path& file : tokenizer_side_files(*options.tokenizer_dir)) writer_options.copy_files.push_back(file);
  }
  writer_options.calibration = options.calibration;
  if (!options.calibration) writer_options.calibration = kept_input_scales(source, plan, options.format);
  ModelWriter writer(options.format, out, plan.writer_plan(), writer_options);

  double squared_error = 0, squared_norm = 0;
  for (size_t i = 0; i < plan.weights.size(); ++i) {
    const PlannedWeight& weight = plan.weights[i];
    const std::string what = source.path().string() + ": " + weight.source;
    log::debug("quantize [{}/{}] {}", i + 1, plan.weights.size(), weight.out.name);
    const ModelWeight loaded = source.load(weight.source);
    if (!weight.out.nvfp4) {
      writer.write_dense(weight.out.name, dense_values(loaded));
      report.dense_parameters += weight.out.shape.numel();
      source.release(weight.source);
      continue;
    }
    const ScaleDecision& decision = decisions.at(weight.scale_group);
    QuantizedWeightReport entry;
    entry.name = weight.out.name;
    entry.shape = weight.out.shape;
    if (decision.copy) {
      writer.write_nvfp4(weight.out.name, loaded.nvfp4);
      entry.tensor_scale = loaded.nvfp4.tensor_scale;
      entry.action = "copied";
    } else {
      const Tensor values = dense_values(loaded);
      const Nvfp4Tensor q = quantize_nvfp4_with_tensor_scale(values, decision.tensor_scale, options.block, what);
      const QuantizationError error = nvfp4_quantization_error(q, values);
      writer.write_nvfp4(weight.out.name, q);
      squared_error += error.squared_error;
      squared_norm += error.squared_norm;
      entry.tensor_scale = q.tensor_scale;
      entry.relative_rms_error = error.relative_rms();
      entry.action = weight.source_nvfp4 ? "requantized" : "quantized";
      if (weight.source_nvfp4)
        log::warn("{}: already NVFP4 but not representable in {} as is; requantized (lossy)", what,
                  model_format_name(options.format));
    }
    report.nvfp4_parameters += weight.out.shape.numel();
    report.weights.push_back(entry);
    source.release(weight.source);
  }
  writer.finish();
  report.weight_bytes_written = writer.bytes_written();
  report.total_relative_rms_error = QuantizationError{squared_error, squared_norm}.relative_rms();
  for (const auto& file : writer_options.copy_files) report.copied_files.push_back(file.filename().string());
  return report;
}

}  // namespace nvfp4lm
