#include "io/quantize_model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "core/logging.h"
#include "io/weight_names.h"
#include "quant/nvfp4_fixed_scale.h"
#include "quant/nvfp4_group_scale.h"

namespace nvfp4lm {
namespace {

constexpr const char* kLmHead = "lm_head.weight";
constexpr const char* kEmbedding = "model.embed_tokens.weight";

struct PlannedWeight {
  WeightPlan plan;
  std::string source;  // name in the source model
  bool source_nvfp4 = false;
  std::string group;  // tensor-scale group (ModelOpt)
};

// What happens to each NVFP4 output weight.
struct ScaleDecision {
  bool copy = false;          // keep the source's codes and scales
  float tensor_scale = 1.0f;  // otherwise quantize with this
};

Tensor dense_values(const ModelWeight& weight) {
  return weight.is_nvfp4() ? dequantize_nvfp4(weight.nvfp4, DType::F32) : weight.dense;
}

std::vector<PlannedWeight> make_plan(const ModelFiles& source, const QuantizeOptions& options, bool& lm_head_untied) {
  const Qwen3Config& config = source.config();
  const int64_t row_multiple = options.block == Nvfp4Block::Tile16x16 ? 16 : 1;
  std::vector<PlannedWeight> plan;
  auto add = [&](const WeightInfo& info, const std::string& name, bool nvfp4) {
    if (nvfp4) {
      NVFP4LM_CHECK(info.shape.rank() == 2 && info.shape[1] % 16 == 0 && info.shape[0] % row_multiple == 0,
                    "{}: weight '{}' of shape {} cannot be NVFP4-quantized (needs columns a multiple of 16{})",
                    source.path().string(), info.name, info.shape.str(), row_multiple > 1 ? " and rows of 16" : "");
    }
    PlannedWeight weight;
    weight.plan = {name, info.shape, nvfp4, info.nvfp4 ? DType::BF16 : info.dtype};
    weight.source = info.name;
    weight.source_nvfp4 = info.nvfp4;
    weight.group = fused_scale_group(name);
    plan.push_back(std::move(weight));
  };
  for (const WeightInfo& info : source.weights()) {
    const bool lm_head = info.kind == WeightKind::LmHead;
    const bool nvfp4_target = options.format != ModelFormat::Gguf || options.gguf_type == gguf::GgmlType::NVFP4;
    const bool nvfp4 = nvfp4_target && (info.nvfp4 || (info.kind && is_nvfp4_projection(*info.kind)) ||
                                        (lm_head && options.quantize_lm_head));
    add(info, info.name, nvfp4);
    if (info.kind == WeightKind::FinalNorm && config.tie_word_embeddings && options.quantize_lm_head &&
        (options.format != ModelFormat::Gguf || options.gguf_type == gguf::GgmlType::NVFP4)) {
      add(source.at(kEmbedding), kLmHead, true);
      lm_head_untied = true;
    }
  }
  return plan;
}

// Tensor scales per group: copy what the target can hold exactly, otherwise one scale per group.
std::map<std::string, ScaleDecision> decide_scales(const ModelFiles& source, const std::vector<PlannedWeight>& plan,
                                                   ModelFormat format) {
  std::map<std::string, std::vector<const PlannedWeight*>> groups;
  for (const auto& weight : plan)
    if (weight.plan.nvfp4) groups[weight.group].push_back(&weight);
  std::map<std::string, ScaleDecision> decisions;
  for (const auto& [group, members] : groups) {
    ScaleDecision decision;
    // Already-NVFP4 members: copyable when every member is NVFP4 with one common tensor scale (1 for .dat).
    bool all_nvfp4 = true;
    std::vector<float> scales;
    for (const PlannedWeight* member : members) {
      all_nvfp4 = all_nvfp4 && member->source_nvfp4;
      if (member->source_nvfp4) {
        const ModelWeight weight = source.load(member->source);
        scales.push_back(weight.nvfp4.tensor_scale);
      }
    }
    const bool one_scale =
        !scales.empty() && std::all_of(scales.begin(), scales.end(), [&](float s) { return s == scales.front(); });
    // GGUF stores a tensor scale per weight ("<name>.scale"): any NVFP4 source weight is kept as it is.
    if (all_nvfp4 &&
        (format == ModelFormat::Gguf || (one_scale && (format != ModelFormat::Dat || scales.front() == 1.0f)))) {
      decision.copy = true;
    } else if (format == ModelFormat::Dat) {
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

}  // namespace

std::vector<fs::path> model_side_files(const ModelFiles& source) {
  std::vector<fs::path> files;
  if (source.tokenizer_dir()) files = tokenizer_side_files(*source.tokenizer_dir());
  std::error_code ec;
  if (fs::is_regular_file(source.directory() / "generation_config.json", ec))
    files.push_back(source.directory() / "generation_config.json");
  return files;
}

QuantizeReport quantize_model(const ModelFiles& source, const fs::path& out, const QuantizeOptions& options) {
  NVFP4LM_CHECK(options.format == ModelFormat::ModeloptNvfp4 || options.format == ModelFormat::Dat ||
                    options.format == ModelFormat::Gguf,
                "quantize writes the modelopt, dat or gguf format, not {}", model_format_name(options.format));
  NVFP4LM_CHECK(!options.calibration || options.format == ModelFormat::ModeloptNvfp4,
                "--calibrate measures activation scales for the ModelOpt format's input_scale; the .dat format stores "
                "none: use --format modelopt, or leave out --calibrate");
  // Before the (long) amax pass, not only when writing starts: OUT may not be, hold or lie in what is read.
  std::vector<GuardedInput> inputs = {{source.path(), "the source model"},
                                      {source.config_path(), "the source model's config"}};
  if (source.tokenizer_dir()) inputs.push_back({*source.tokenizer_dir(), "the source model's tokenizer directory"});
  guard_output(out, "the output", inputs, options.overwrite, model_output_kind(options.format));

  QuantizeReport report;
  const std::vector<PlannedWeight> plan = make_plan(source, options, report.lm_head_untied);
  const auto decisions = decide_scales(source, plan, options.format);

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
  std::vector<WeightPlan> writer_plan;
  for (const auto& weight : plan) writer_plan.push_back(weight.plan);
  ModelWriter writer(options.format, out, writer_plan, writer_options);

  double squared_error = 0, squared_norm = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedWeight& weight = plan[i];
    const std::string what = source.path().string() + ": " + weight.source;
    log::debug("quantize [{}/{}] {}", i + 1, plan.size(), weight.plan.name);
    const ModelWeight loaded = source.load(weight.source);
    if (!weight.plan.nvfp4) {
      writer.write_dense(weight.plan.name, dense_values(loaded));
      report.dense_parameters += weight.plan.shape.numel();
      source.release(weight.source);
      continue;
    }
    const ScaleDecision& decision = decisions.at(weight.group);
    QuantizedWeightReport entry;
    entry.name = weight.plan.name;
    entry.shape = weight.plan.shape;
    if (decision.copy) {
      writer.write_nvfp4(weight.plan.name, loaded.nvfp4);
      entry.tensor_scale = loaded.nvfp4.tensor_scale;
      entry.action = "copied";
    } else {
      const Tensor values = dense_values(loaded);
      const Nvfp4Tensor q = quantize_nvfp4_with_tensor_scale(values, decision.tensor_scale, options.block, what);
      const QuantizationError error = nvfp4_quantization_error(q, values);
      writer.write_nvfp4(weight.plan.name, q);
      squared_error += error.squared_error;
      squared_norm += error.squared_norm;
      entry.tensor_scale = q.tensor_scale;
      entry.relative_rms_error = error.relative_rms();
      entry.action = weight.source_nvfp4 ? "requantized" : "quantized";
      if (weight.source_nvfp4)
        log::warn("{}: already NVFP4 but not representable in {} as is; requantized (lossy)", what,
                  model_format_name(options.format));
    }
    report.nvfp4_parameters += weight.plan.shape.numel();
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
