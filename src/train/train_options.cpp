// See train_options.h. The settings are the rows of the flag table (train_flags.h): the JSON form, the checks and
// the resume rules walk it. This file adds what lies between rows (--epochs replacing a saved --max-steps) and the
// flag spellings of the enums declared in the header.
#include "train/train_options.h"

#include <fmt/ranges.h>

#include <vector>

#include "core/error.h"
#include "core/json_text.h"
#include "core/logging.h"
#include "core/text_excerpt.h"
#include "train/checkpoint.h"
#include "train/train_flags.h"

namespace nvfp4lm {

using json = nlohmann::json;

std::string_view block_flag_name(Nvfp4Block block) { return block == Nvfp4Block::Row1x16 ? "1d" : "2d"; }

Nvfp4Block parse_block_flag(std::string_view name) {
  if (name == "1d") return Nvfp4Block::Row1x16;
  if (name == "2d") return Nvfp4Block::Tile16x16;
  NVFP4LM_FAIL("unknown --block '{}' (choose 1d for 1x16 blocks or 2d for 16x16 tiles)", name);
}

LoraOptions train_lora_options(const TrainOptions& options) {
  LoraOptions lora;
  lora.rank = options.lora_rank;
  lora.alpha = options.lora_alpha;
  lora.dropout = options.lora_dropout;
  lora.targets = parse_lora_targets(options.lora_targets);
  lora.seed = options.seed;
  return lora;
}

int64_t first_adapted_layer(const TrainOptions& options, int64_t layers) {
  return options.train_last_layers > 0 ? layers - options.train_last_layers : 0;
}

std::string_view export_format_flag_name(ModelFormat format) {
  switch (format) {
    case ModelFormat::ModeloptNvfp4:
      return "modelopt";
    case ModelFormat::CompressedTensorsNvfp4:
      return "compressed-tensors";
    case ModelFormat::Dat:
      return "dat";
    case ModelFormat::HfSafetensors:
      return "bf16";
    case ModelFormat::Gguf:
      return "gguf";
  }
  return "?";
}

ModelFormat parse_export_format(std::string_view name) {
  for (ModelFormat format : {ModelFormat::ModeloptNvfp4, ModelFormat::CompressedTensorsNvfp4, ModelFormat::Dat,
                             ModelFormat::HfSafetensors, ModelFormat::Gguf})
    if (name == export_format_flag_name(format)) return format;
  NVFP4LM_FAIL("unknown export format '{}' (choose modelopt, compressed-tensors, dat, bf16 or gguf)", name);
}

std::string_view train_objective_name(TrainObjective objective) {
  return objective == TrainObjective::Dpo ? "dpo" : objective == TrainObjective::Grpo ? "grpo" : "sft";
}

TrainObjective parse_train_objective(std::string_view name) {
  if (name == "sft") return TrainObjective::Sft;
  if (name == "dpo") return TrainObjective::Dpo;
  if (name == "grpo") return TrainObjective::Grpo;
  NVFP4LM_FAIL(
      "unknown --objective {}; use sft (supervised: cross-entropy on the data's completions), dpo (preference pairs) "
      "or grpo (prompts and a reward)",
      quoted_excerpt(name));
}

std::string_view nonfinite_name(NonFinitePolicy policy) { return policy == NonFinitePolicy::Skip ? "skip" : "stop"; }

NonFinitePolicy parse_nonfinite(std::string_view name) {
  if (name == "skip") return NonFinitePolicy::Skip;
  if (name == "stop") return NonFinitePolicy::Stop;
  NVFP4LM_FAIL("unknown --nonfinite '{}' (choose skip or stop)", name);
}

std::string_view compute_dtype_name(const std::optional<DType>& dtype) {
  if (!dtype) return "auto";
  return *dtype == DType::F32 ? "float32" : *dtype == DType::BF16 ? "bfloat16" : "float16";
}

std::optional<DType> parse_compute_dtype(std::string_view name) {
  if (name == "auto") return std::nullopt;
  if (name == "float32") return DType::F32;
  if (name == "bfloat16") return DType::BF16;
  if (name == "float16") return DType::F16;
  NVFP4LM_FAIL("unknown --compute-dtype '{}' (choose auto, float32 or bfloat16)", name);
}

void check_compute_dtype(const std::optional<DType>& dtype, const std::string& device) {
  if (!dtype) return;
  NVFP4LM_CHECK(*dtype != DType::F16,
                "--compute-dtype float16 is not supported: Qwen3's activations overflow float16's range (max 65504); "
                "use bfloat16 (the same memory, fp32's range) with --device cuda, or float32 on the CPU");
  const bool cpu = Device::parse(device).is_cpu();
  NVFP4LM_CHECK(!cpu || *dtype == DType::F32,
                "--compute-dtype bfloat16 runs on CUDA only: the CPU engine computes in float32 (the reference); use "
                "--compute-dtype float32 (or auto) on the CPU, or --device cuda");
  NVFP4LM_CHECK(cpu || *dtype == DType::BF16,
                "--compute-dtype float32 is not supported on CUDA: the CUDA engine keeps activations in bfloat16 with "
                "fp32 accumulation; use --compute-dtype bfloat16 (or auto), or --device cpu for float32");
}

std::string resolve_resume_mode(TrainOptions& options) {
  if (options.resume_mode != ResumeMode::Auto) {
    options.resume = options.resume_mode == ResumeMode::Always;
    return {};
  }
  const std::optional<CheckpointInfo> checkpoint =
      options.output.empty() ? std::nullopt : latest_checkpoint(options.output, VerifyLevel::Sizes);
  options.resume = checkpoint.has_value();
  return checkpoint ? fmt::format("--resume auto: continuing from {}", checkpoint->dir.string())
                    : fmt::format("--resume auto: {} holds no checkpoint yet; starting a new run",
                                  options.output.empty() ? std::string("the run directory") : options.output);
}

std::string_view train_option_flag(std::string_view key) {
  for (const TrainFlag& flag : train_flags())
    if (flag.saved() && flag.key == key) return flag.name;
  return key;
}

void validate_train_options(const TrainOptions& options) {
  for (const TrainFlag& flag : train_flags())
    if (flag.check) flag.check(options);
}

json train_options_to_json(const TrainOptions& options) {
  json out = json::object();
  for (const TrainFlag& flag : train_flags())
    if (flag.saved()) out[std::string(flag.key)] = train_flag_to_json(flag, options);
  if (!options.synthetic)
    out["model_as_typed"] = options.model_as_typed.empty() ? options.model : options.model_as_typed;
  return out;
}

TrainOptions train_options_from_json(const json& value, const std::string& where) {
  NVFP4LM_CHECK(value.is_object(), "{}: training settings must be a JSON object, found {}", where, value.type_name());
  TrainOptions options;
  for (const TrainFlag& flag : train_flags()) {
    if (!flag.saved()) continue;
    const std::string key(flag.key);
    if (!value.contains(key) && flag.added_later) continue;  // an earlier version's config: the default
    NVFP4LM_CHECK(value.contains(key), "{}: training setting \"{}\" is missing", where, key);
    train_flag_from_json(flag, options, value.at(key), where);
  }
  options.model_as_typed = json_field_or<std::string>(value, "model_as_typed", "", where);
  return options;
}

TrainOptions resolve_resume_options(const json& saved, const TrainOptions& current, const std::set<std::string>& given,
                                    const std::string& where) {
  train_options_from_json(saved, where);  // the saved settings must be complete and well-formed
  json merged = saved;
  const TrainOptions defaults;
  for (const TrainFlag& flag : train_flags())
    if (flag.saved() && flag.added_later && !merged.contains(std::string(flag.key)))
      merged[std::string(flag.key)] = train_flag_to_json(flag, defaults);
  const json now = train_options_to_json(current);
  std::vector<std::string> schedule_changes;
  for (const TrainFlag& flag : train_flags()) {
    const std::string key(flag.key);
    if (!flag.saved() || !given.count(key) || merged[key] == now[key]) continue;
    const std::string value = train_flag_value_text(flag, now[key]), was = train_flag_value_text(flag, merged[key]);
    switch (flag.resume) {
      case ResumeGroup::Identity:
        NVFP4LM_FAIL(
            "--resume: {} is {} but the run in {} was started with {}; a resumed run must keep it (omit {} to "
            "reuse the saved value, or start a new run with another --output)",
            flag.name, value, where, was, flag.name);
      case ResumeGroup::Schedule:
        schedule_changes.push_back(fmt::format("{} {} (was {})", flag.name, value, was));
        break;
      case ResumeGroup::Free:
      case ResumeGroup::NotSaved:
        break;
    }
    merged[key] = now[key];
  }
  // --epochs and --max-steps choose the length together: --epochs alone replaces a saved --max-steps.
  if (given.count("epochs") && !given.count("max_steps")) merged["max_steps"] = json(int64_t{0});
  if (!schedule_changes.empty()) {
    log::warn("--resume with a changed schedule: {}; from here on the run differs from an uninterrupted one",
              fmt::join(schedule_changes, ", "));
  }
  TrainOptions resolved = train_options_from_json(merged, where);
  resolved.resume_mode = current.resume_mode;
  resolved.resume = true;
  resolved.output = current.output;  // the directory the checkpoint was found in (it may have moved)
  return resolved;
}

}  // namespace nvfp4lm
