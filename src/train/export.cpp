// See export.h.
#include "train/export.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "core/json_text.h"
#include "core/logging.h"
#include "core/memory.h"
#include "io/checksum.h"
#include "io/export_plan.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "io/model_writer.h"
#include "io/peft_adapter.h"
#include "io/safetensors_reader.h"
#include "io/weight_names.h"
#include "model/lora.h"
#include "model/qwen3_trainable.h"
#include "quant/nvfp4_fixed_scale.h"
#include "quant/nvfp4_group_scale.h"
#include "train/checkpoint.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

Tensor host(const Tensor& tensor) { return tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu()); }

}  // namespace

std::optional<DType> torch_dtype_of(const nlohmann::json& config) {
  const auto it = config.find("torch_dtype");
  if (it == config.end() || !it->is_string()) return std::nullopt;
  const std::string name = it->get<std::string>();
  if (name == "bfloat16") return DType::BF16;
  if (name == "float32") return DType::F32;
  if (name == "float16") return DType::F16;
  return std::nullopt;
}

const char* torch_dtype_name(DType dtype) {
  return dtype == DType::F32 ? "float32" : dtype == DType::F16 ? "float16" : "bfloat16";
}

void check_export_target(const fs::path& out, const ExportSource& source, bool overwrite, OutputKind kind) {
  guard_run_output(out, "the export", source.protected_paths, overwrite, kind);
}

void guard_run_output(const fs::path& out, std::string_view what, const std::vector<GuardedInput>& protected_paths,
                      bool overwrite, OutputKind kind) {
  guard_output(out, what, protected_paths, overwrite, kind);
  // Inside a run directory, a checkpoint's name is the run's even before that step is saved.
  const fs::path target = real_path(out);
  for (const GuardedInput& input : protected_paths) {
    if (!input.may_hold_outputs) continue;
    NVFP4LM_CHECK(target.parent_path() != real_path(input.path) || !is_run_file_name(target.filename().string()),
                  "refusing to write {} {}: {} is a name the run in {} uses for its own files (checkpoints step-N, "
                  "{}); choose another name",
                  what, out.string(), target.filename().string(), input.path.string(), kSourceModelDirName);
  }
}

ExportReport export_weights(std::span<const NamedTensor> masters, const ExportSource& source, const fs::path& out,
                            const ExportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const MemoryPhase phase("export");
  check_export_target(out, source, options.overwrite, model_output_kind(options.format));
  const Qwen3Config config = parse_qwen3_config(source.config_json, "the model's config.json");
  const FormatCapabilities& format = format_capabilities(options.format, options.gguf_type);
  NVFP4LM_CHECK(!options.calibration || format.activation_scales,
                "activation calibration is written as the ModelOpt format's input_scale; --format {} stores none: "
                "export --format modelopt, or leave out --calibrate / --calibrate-steps",
                export_format_flag_name(options.format));

  ExportReport report;
  report.out = out;
  report.format = options.format;
  report.dense_dtype = format.nvfp4_weights
                           ? options.dense_dtype.value_or(torch_dtype_of(source.config_json).value_or(DType::BF16))
                           : DType::BF16;
  NVFP4LM_CHECK(
      report.dense_dtype == DType::BF16 || report.dense_dtype == DType::F32 || report.dense_dtype == DType::F16,
      "dense weights can be exported as bf16, f32 or f16, not {}", dtype_name(report.dense_dtype));

  // The masters the config needs, as the plan's sources.
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const NamedTensor& master : masters) by_name[master.name] = &master.tensor;
  std::vector<WeightInfo> sources;
  for (const ExpectedWeight& expected : qwen3_expected_weights(config)) {
    auto it = by_name.find(expected.name);
    NVFP4LM_CHECK(it != by_name.end(), "export: the trained weights have no '{}' (needed by the model's config)",
                  expected.name);
    NVFP4LM_CHECK(it->second->shape() == expected.shape, "export: '{}' has shape {}, the config needs {}",
                  expected.name, it->second->shape().str(), expected.shape.str());
    WeightInfo info;
    info.name = expected.name;
    info.shape = expected.shape;
    info.kind = expected.kind;
    info.dtype = it->second->dtype();
    sources.push_back(std::move(info));
  }
  const ExportPlan plan = plan_export(sources, config.tie_word_embeddings,
                                      {.format = format,
                                       .block = options.block,
                                       .quantize_lm_head = options.quantize_lm_head,
                                       .dense_dtype = report.dense_dtype},
                                      "export");
  report.lm_head_untied = plan.lm_head_untied;

  // Tensor scale per fused group: the trained forward's (joint amax / (6 * 448)), or 1 where the format stores none.
  std::map<std::string, float> group_scale;
  if (format.stores_tensor_scale) {
    std::map<std::string, Nvfp4GroupScale> groups;
    for (const PlannedWeight& weight : plan.weights)
      if (weight.out.nvfp4) groups[weight.scale_group].add(host(*by_name.at(weight.source)), weight.source);
    for (const auto& [group, scale] : groups) group_scale[group] = scale.tensor_scale();
  } else if (format.nvfp4_weights) {
    log::warn(
        "the .dat format stores no tensor scale: NVFP4 weights are quantized with tensor scale 1, which is "
        "close to but not exactly the trained QAT forward (export --format modelopt for an exact copy)");
  }

  ModelWriterOptions writer_options;
  writer_options.overwrite = options.overwrite;
  writer_options.config_json = source.config_json;
  writer_options.config_json["torch_dtype"] = torch_dtype_name(report.dense_dtype);
  if (report.lm_head_untied) writer_options.config_json["tie_word_embeddings"] = false;
  writer_options.generation_config = source.generation_config;
  writer_options.calibration = options.calibration;
  writer_options.gguf_type = options.gguf_type;
  for (const fs::path& file : source.side_files) {
    const std::string name = file.filename().string();
    if (name == "config.json" || name == "generation_config.json") continue;
    writer_options.copy_files.push_back(file);
    report.copied_files.push_back(name);
  }
  ModelWriter writer(options.format, out, plan.writer_plan(), writer_options);
  for (const PlannedWeight& weight : plan.weights) {
    const Tensor values = host(*by_name.at(weight.source));
    if (weight.out.nvfp4) {
      const auto scale = group_scale.find(weight.scale_group);
      const float tensor_scale = scale == group_scale.end() ? 1.0f : scale->second;
      writer.write_nvfp4(weight.out.name,
                         quantize_nvfp4_with_tensor_scale(values, tensor_scale, options.block, weight.out.name));
      ++report.nvfp4_tensors;
    } else {
      writer.write_dense(weight.out.name, values);
      ++report.dense_tensors;
    }
    report.parameters += weight.out.shape.numel();
  }
  writer.finish();
  report.weight_bytes = writer.bytes_written();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

namespace {

// What export_dat_file writes beside FILE, by name, with the bytes of each (config.json as the export writes it).
std::vector<std::pair<std::string, std::string>> dat_side_files(const fs::path& exported_dir) {
  std::vector<std::pair<std::string, std::string>> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(exported_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == kDatFileName || !entry.is_regular_file(ec)) continue;
    files.emplace_back(name, read_text_file(entry.path()));
  }
  return files;
}

}  // namespace

void check_dat_file_target(const fs::path& file, const ExportSource& source, bool overwrite) {
  NVFP4LM_CHECK(file.extension() == ".dat",
                "--output-dat {}: name a .dat file (the weights; config.json and the "
                "tokenizer go beside it)",
                file.string());
  guard_output(file, "--output-dat", source.protected_paths, overwrite, OutputKind::File);
}

ExportReport export_dat_file(std::span<const NamedTensor> masters, const ExportSource& source, const fs::path& file,
                             const ExportOptions& options) {
  return export_as_dat_file(file, source, options.overwrite, [&](const fs::path& dir, const ExportSource& unguarded) {
    ExportOptions staged = options;
    staged.format = ModelFormat::Dat;
    staged.overwrite = false;
    return export_weights(masters, unguarded, dir, staged);
  });
}

ExportReport export_as_dat_file(const fs::path& file, const ExportSource& source, bool overwrite,
                                const DatDirectoryWriter& write_directory) {
  check_dat_file_target(file, source, overwrite);
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  // The usual directory export into a temporary beside FILE (FILE's own temporary name, so that the next export to
  // FILE removes it when this process is killed), then its files published one by one.
  const StagedDirectory staging(file);  // never published itself: removed, with what is left in it, at the end
  const fs::path exported = staging.path() / "model";
  ExportSource staged_source = source;
  staged_source.protected_paths.clear();  // checked above for the real targets
  ExportReport report = write_directory(exported, staged_source);
  // Something already beside FILE: the same bytes are fine (the config.json of the .dat the run started from, or
  // another export of this model to FILE); anything else only with --overwrite, and never an input.
  auto holds = [](const fs::path& target, const std::string& bytes) {
    std::error_code ec;
    return fs::is_regular_file(fs::symlink_status(target, ec)) && read_text_file(target) == bytes;
  };
  // Every side file is checked before any is published: a refusal leaves nothing of this export behind.
  const auto side_files = dat_side_files(exported);
  std::vector<bool> already_there(side_files.size(), false);
  for (size_t i = 0; i < side_files.size(); ++i) {
    const auto& [name, bytes] = side_files[i];
    const fs::path target = dir / name;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(target, ec))) continue;
    already_there[i] = holds(target, bytes);
    if (already_there[i]) continue;
    NVFP4LM_CHECK(overwrite,
                  "--output-dat {}: {} already exists beside it with other contents (another model's?); choose "
                  "another directory, or pass --overwrite to replace it",
                  file.string(), target.string());
    guard_output(target, "--output-dat's " + name, source.protected_paths, /*overwrite=*/true, OutputKind::File);
  }
  for (size_t i = 0; i < side_files.size(); ++i) {
    if (already_there[i]) continue;
    const std::string& name = side_files[i].first;
    const fs::path target = dir / name;
    if (publish_new(exported / name, target, OutputKind::File)) continue;
    // It appeared since the check above (another process): the same rules, at the publishing step.
    if (holds(target, side_files[i].second)) continue;
    NVFP4LM_CHECK(overwrite,
                  "--output-dat {}: {} appeared beside it while this export ran, with other contents; choose another "
                  "directory, or pass --overwrite to replace it",
                  file.string(), target.string());
    publish(exported / name, target, OutputKind::File, /*overwrite=*/true, "--output-dat's " + name);
  }
  publish(exported / kDatFileName, file, OutputKind::File, overwrite, "--output-dat");
  report.out = file;
  return report;
}

namespace {

// What open_checkpoint_for_export reads of the checkpoint `dir`.
CheckpointExportInput read_checkpoint_for_export(const fs::path& dir);

}  // namespace

CheckpointExportInput open_checkpoint_for_export(const fs::path& path) {
  std::error_code ec;
  NVFP4LM_CHECK(fs::is_directory(path, ec),
                "{} does not exist or is not a directory (expected a checkpoint step-N or "
                "a run directory)",
                path.string());
  if (fs::is_regular_file(path / kTrainerStateFileName, ec)) return read_checkpoint_for_export(path);
  // A run directory. Verified like --resume does: a newest checkpoint that fails its checksums is skipped (with a
  // warning) for the one before it. A run still training prunes old checkpoints: the one chosen may be deleted before
  // it is read; then the newest is taken again (a few times: each try follows a new save of the run).
  constexpr int kTries = 20;
  // The checkpoint `dir` with its model file mapped (what load_checkpoint_masters reads then) and its checksums
  // verified; Error when it was deleted or is damaged.
  auto open_verified = [](const fs::path& dir) {
    CheckpointExportInput input = read_checkpoint_for_export(dir);
    input.verified_model = SafetensorsFile::open(dir / kModelFileName);
    const std::string problem = verify_checksum_manifest(
        dir, {kModelFileName, kOptimizerFileName, kTrainerStateFileName}, VerifyLevel::Checksums);
    NVFP4LM_CHECK(problem.empty(), "{}: {}", dir.string(), problem);
    return input;
  };
  for (int attempt = 1;; ++attempt) {
    const std::optional<CheckpointInfo> latest = latest_checkpoint(path, VerifyLevel::Sizes);
    NVFP4LM_CHECK(latest.has_value(),
                  "{} is neither a checkpoint (a step-N directory with {}) nor a run directory with a complete "
                  "checkpoint",
                  path.string(), kTrainerStateFileName);
    try {
      return open_verified(latest->dir);
    } catch (const Error& e) {
      if (fs::exists(latest->dir, ec)) {
        // Damaged, not deleted: skipped for the newest one that verifies, as --resume does (latest_checkpoint at
        // Checksums says why).
        const std::optional<CheckpointInfo> verified = latest_checkpoint(path, VerifyLevel::Checksums);
        NVFP4LM_CHECK(verified.has_value(), "{} holds no checkpoint that verifies ({})", path.string(), e.what());
        return open_verified(verified->dir);
      }
      NVFP4LM_CHECK(attempt < kTries,
                    "{}: the run deleted checkpoint after checkpoint while this export read them ({} tries); export "
                    "a step-N directory that stays, or wait for the run to finish",
                    path.string(), attempt);
    }
    log::info("{} was deleted while being read (the run pruned it); taking the newest checkpoint again",
              latest->dir.string());
  }
}

namespace {

CheckpointExportInput read_checkpoint_for_export(const fs::path& dir) {
  std::error_code ec;
  CheckpointExportInput input;
  input.checkpoint = dir;
  const json state = read_trainer_state(input.checkpoint);
  const std::string where = (input.checkpoint / kTrainerStateFileName).string();
  input.step = state["step"].get<int64_t>();
  NVFP4LM_CHECK(state.contains("config"), "{}: \"config\" (the run's settings) is missing", where);
  input.run_options = train_options_from_json(state["config"], where);
  NVFP4LM_CHECK(state.contains("model") && state["model"].is_object() && state["model"].contains("config") &&
                    state["model"]["config"].is_object(),
                "{}: \"model\".\"config\" (the model's config.json) is missing; this checkpoint cannot be exported "
                "on its own",
                where);
  const json& model = state["model"];
  input.source.config_json = model["config"];
  if (model.contains("generation_config") && model["generation_config"].is_object())
    input.source.generation_config = model["generation_config"];

  const fs::path run_dir = input.checkpoint.parent_path();
  const fs::path copy = run_dir / kSourceModelDirName;
  const std::string source_model = json_field_or(model, "source", std::string(), where);
  if (fs::is_directory(copy, ec)) {
    input.source.side_files = tokenizer_side_files(copy);
  } else if (!source_model.empty() && fs::exists(source_model, ec)) {
    const fs::path dir =
        fs::is_directory(source_model, ec) ? fs::path(source_model) : fs::path(source_model).parent_path();
    input.source.side_files = tokenizer_side_files(dir);
  }
  if (input.source.side_files.empty())
    log::warn("no tokenizer files found for {} (neither {} nor the source model {}); the export will lack them",
              input.checkpoint.string(), copy.string(), source_model.empty() ? "(unknown)" : source_model);
  input.source.protected_paths = {{input.checkpoint, "the checkpoint"},
                                  {run_dir, "the run directory", /*may_hold_outputs=*/true},
                                  {copy, "the run's copy of the source model's files"}};
  for (const fs::path& checkpoint : run_checkpoint_dirs(run_dir))
    input.source.protected_paths.push_back({checkpoint, "the run's checkpoint"});
  if (!source_model.empty()) input.source.protected_paths.push_back({source_model, "the source model"});
  if (!input.run_options.data.empty())
    input.source.protected_paths.push_back({input.run_options.data, "the training data"});
  if (!input.run_options.eval_data.empty())
    input.source.protected_paths.push_back({input.run_options.eval_data, "the evaluation data"});
  if (state.contains("calibration"))
    input.recorded_calibration = ActivationCalibration::from_json(state["calibration"], where + " \"calibration\"");
  return input;
}

}  // namespace

std::vector<NamedTensor> load_checkpoint_masters(const CheckpointExportInput& input) {
  std::shared_ptr<SafetensorsFile> file = input.verified_model;
  if (!file) {
    const std::string problem = verify_checksum_manifest(
        input.checkpoint, {kModelFileName, kOptimizerFileName, kTrainerStateFileName}, VerifyLevel::Checksums);
    NVFP4LM_CHECK(problem.empty(), "checkpoint {} is incomplete or corrupted: {}", input.checkpoint.string(), problem);
    file = SafetensorsFile::open(input.checkpoint / kModelFileName);
  }
  std::vector<NamedTensor> masters;
  for (const SafetensorsEntry& entry : file->entries()) masters.push_back({entry.name, file->tensor(entry)});
  return masters;
}

namespace {

bool is_dat_file_export(const fs::path& out, const ExportOptions& options) {
  return options.format == ModelFormat::Dat && out.extension() == ".dat";
}

}  // namespace

void check_checkpoint_export_target(const CheckpointExportInput& input, const fs::path& out,
                                    const ExportOptions& options) {
  if (is_dat_file_export(out, options)) {
    check_dat_file_target(out, input.source, options.overwrite);
  } else {
    check_export_target(out, input.source, options.overwrite, model_output_kind(options.format));
  }
}

ExportReport export_checkpoint(const CheckpointExportInput& input, const fs::path& out, const ExportOptions& options,
                               std::optional<std::span<const NamedTensor>> masters) {
  check_checkpoint_export_target(input, out, options);
  std::vector<NamedTensor> loaded;
  if (!masters) {
    loaded = load_checkpoint_masters(input);
    masters = loaded;
  }
  if (is_dat_file_export(out, options)) return export_dat_file(*masters, input.source, out, options);
  return export_weights(*masters, input.source, out, options);
}

ExportReport export_lora_adapter(std::span<const NamedTensor> adapters, const TrainOptions& run,
                                 const Qwen3Config& config, const ExportSource& source, const fs::path& out,
                                 bool overwrite) {
  NVFP4LM_ASSERT(run.lora_rank > 0, "export_lora_adapter of a run without --lora");
  const auto start = std::chrono::steady_clock::now();
  check_export_target(out, source, overwrite, OutputKind::Directory);
  const LoraOptions lora = train_lora_options(run);
  PeftLoraConfig peft;
  peft.base_model = run.model_as_typed.empty() ? run.model : run.model_as_typed;  // as the user typed it
  peft.rank = lora.rank;
  peft.alpha = lora.effective_alpha();
  peft.dropout = lora.dropout;
  for (const LoraTarget target : lora.targets) peft.target_modules.emplace_back(lora_target_module(target));
  const int64_t layers = config.num_hidden_layers, first_adapted = first_adapted_layer(run, layers);
  if (first_adapted > 0) {
    std::vector<int> adapted;
    for (int64_t i = first_adapted; i < layers; ++i) adapted.push_back(static_cast<int>(i));
    peft.layers_to_transform = adapted;
  }
  // Every adapter the config implies, and nothing else, in the file.
  size_t expected = 0;
  for (const ExpectedWeight& weight : qwen3_expected_weights(config)) {
    const std::optional<LayerWeightName> layer = parse_layer_weight_name(weight.name);
    if (!layer || layer->layer < first_adapted || !lora.targets_weight(layer->weight)) continue;
    for (const std::string& name : {lora_a_name(weight.name), lora_b_name(weight.name)}) {
      ++expected;
      NVFP4LM_CHECK(std::any_of(adapters.begin(), adapters.end(), [&](const NamedTensor& t) { return t.name == name; }),
                    "the adapters lack {} (the run's --lora-targets {} need it)", name, run.lora_targets);
    }
  }
  NVFP4LM_CHECK(expected == adapters.size(), "{} adapter tensors where the run's settings give {}", adapters.size(),
                expected);
  std::vector<PeftTensor> tensors;
  for (const NamedTensor& t : adapters) tensors.push_back({t.name, t.tensor});
  // With QAT over a dense base the adapters trained over its NVFP4 quantization: say which base they need, in the log
  // and in the adapter's README.md.
  std::string base_note;
  std::error_code ec;
  if (run.qat != QatMode::Off && !run.model.empty() && fs::exists(run.model, ec)) {
    const WeightInfo* q_proj = open_model(run.model)->find(layer_weight_name(0, LayerWeight::QProj));
    if (q_proj != nullptr && !q_proj->nvfp4) base_note = lora_over_quantized_base_note(peft.base_model, run.qat);
  }
  peft.model_card = peft_adapter_model_card(peft, base_note);
  write_peft_adapter(out, peft, tensors, overwrite);
  if (!base_note.empty()) log::warn("{}: {}", out.string(), base_note);
  if (const std::string note = vllm_lora_rank_note(peft.rank); !note.empty()) log::warn("{}: {}", out.string(), note);
  ExportReport report;
  report.out = out;
  report.lora_adapter = true;
  report.dense_tensors = static_cast<int64_t>(adapters.size());
  for (const NamedTensor& t : adapters) {
    report.parameters += t.tensor.numel();
    report.weight_bytes += t.tensor.nbytes();
  }
  report.dense_dtype = DType::F32;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

std::string describe_export(const ExportReport& report) {
  if (report.lora_adapter)
    return fmt::format(
        "exported the LoRA adapter (PEFT: {} and {}) to {} in {:.1f} s: {} F32 tensors, {} parameters, "
        "{:.1f} MiB",
        kPeftConfigFileName, kPeftWeightsFileName, report.out.string(), report.seconds, report.dense_tensors,
        report.parameters, to_mib(report.weight_bytes));
  std::string text =
      report.dense ? fmt::format("exported a dense {} copy ({}) to {} in {:.1f} s: ", dtype_name(report.dense_dtype),
                                 model_format_name(report.format), report.out.string(), report.seconds)
                   : fmt::format("exported {} to {} in {:.1f} s: ", format_capabilities(report.format).title,
                                 report.out.string(), report.seconds);
  if (report.dense) {
    text += fmt::format("{} {} tensors ({} NVFP4 dequantized), {} values rounded to {}", report.dense_tensors,
                        dtype_name(report.dense_dtype), report.dequantized_tensors, report.rounded_values,
                        dtype_name(report.dense_dtype));
  } else if (report.format == ModelFormat::HfSafetensors) {
    text += fmt::format("{} BF16 tensors", report.dense_tensors);
  } else if (report.format == ModelFormat::Gguf) {
    text += fmt::format("{} NVFP4 + {} other tensors", report.nvfp4_tensors, report.dense_tensors);
  } else {
    text += fmt::format("{} NVFP4 + {} dense {} tensors", report.nvfp4_tensors, report.dense_tensors,
                        dtype_name(report.dense_dtype));
  }
  text += fmt::format(", {:.1f} MiB of weights", to_mib(report.weight_bytes));
  if (report.lm_head_untied) text += ", lm_head untied and quantized";
  if (report.format == ModelFormat::Gguf) return text + ", tokenizer and chat template in the metadata";
  text += report.copied_files.empty() ? ", no tokenizer files"
                                      : fmt::format(", {} files copied (tokenizer)", report.copied_files.size());
  return text;
}

}  // namespace nvfp4lm
