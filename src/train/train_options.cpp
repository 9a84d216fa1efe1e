// See train_options.h. Every setting is listed once, in for_each_field, with its JSON key and its resume group;
// the JSON conversion and the resume rules walk that list.
#include "train/train_options.h"

#include <fmt/ranges.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/logging.h"
#include "tokenizer/chat_template_choice.h"
#include "train/optim/optimizer.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

// How a setting may change on --resume (train_options.h).
enum class ResumeGroup { Identity, Schedule, Free };

// Calls visit(key, field, group) for every setting, in the order of the header.
template <typename Options, typename Visit>
void for_each_field(Options& o, Visit&& visit) {
  using G = ResumeGroup;
  visit("model", o.model, G::Identity);
  visit("tokenizer", o.tokenizer, G::Identity);
  visit("data", o.data, G::Identity);
  visit("data_format", o.data_format, G::Identity);
  visit("data_template", o.data_template, G::Identity);
  visit("strict", o.strict, G::Identity);
  visit("train_on_everything", o.train_on_everything, G::Identity);
  visit("packing", o.packing, G::Identity);
  visit("chat_template", o.chat_template, G::Identity);
  visit("qat", o.qat, G::Identity);
  visit("quantize_lm_head", o.quantize_lm_head, G::Identity);
  visit("block", o.block, G::Identity);
  visit("loss", o.loss, G::Identity);
  visit("train_last_layers", o.train_last_layers, G::Identity);
  visit("master", o.bf16_master, G::Identity);
  visit("recompute", o.recompute, G::Free);            // memory for compute; the gradients are the same
  visit("fused_update", o.fused_update, G::Free);      // the same updates (no clipping either way), less memory
  visit("packed_weights", o.packed_weights, G::Free);  // the same forward weights, less memory
  visit("seq_len", o.seq_len, G::Identity);
  visit("batch", o.batch, G::Identity);
  visit("grad_accum", o.grad_accum, G::Identity);
  visit("epochs", o.epochs, G::Schedule);
  visit("max_steps", o.max_steps, G::Schedule);
  visit("optimizer", o.optimizer, G::Identity);
  visit("lr", o.lr, G::Schedule);
  visit("lr_schedule", o.lr_schedule, G::Schedule);
  visit("warmup", o.warmup, G::Schedule);
  visit("min_lr_ratio", o.min_lr_ratio, G::Schedule);
  visit("weight_decay", o.weight_decay, G::Identity);
  visit("max_grad_norm", o.max_grad_norm, G::Schedule);
  visit("seed", o.seed, G::Identity);
  visit("output", o.output, G::Free);
  visit("save_every", o.save_every, G::Free);
  visit("keep", o.keep, G::Free);
  visit("export", o.export_path, G::Free);
  visit("export_format", o.export_format, G::Free);
  visit("overwrite", o.overwrite, G::Free);
  visit("device", o.device, G::Free);
  visit("max_memory", o.max_memory_gib, G::Free);
  visit("metrics", o.metrics, G::Free);
  visit("memory_report", o.memory_report, G::Free);
  visit("nonfinite", o.nonfinite, G::Free);
}

// Keys holding paths: stored absolute.
bool is_path_key(std::string_view key) {
  return key == "model" || key == "tokenizer" || key == "data" || key == "output" || key == "export" ||
         key == "metrics" || key == "memory_report";
}

std::string absolute_path(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const fs::path absolute = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? fs::absolute(path).lexically_normal().string() : absolute.string();
}

// ---- one value <-> JSON -----------------------------------------------------------------------------------
json encode(bool v) { return v; }
json encode(int v) { return v; }
json encode(int64_t v) { return v; }
json encode(uint64_t v) { return v; }
json encode(double v) { return v; }
json encode(DataFormat v) { return data_format_name(v); }
json encode(PairTemplate v) { return pair_template_name(v); }
json encode(const std::optional<ChatTemplate>& v) { return chat_template_flag_name(v); }
json encode(QatMode v) { return qat_mode_name(v); }
json encode(Nvfp4Block v) { return block_flag_name(v); }
json encode(LossKind v) { return loss_kind_name(v); }
json encode(Recompute v) { return recompute_name(v); }
json encode(LrDecay v) { return lr_decay_name(v); }
json encode(ModelFormat v) { return export_format_flag_name(v); }
json encode(NonFinitePolicy v) { return nonfinite_name(v); }

struct Decoder {
  const json& value;
  const std::string& where;
  const char* key;

  void fail(const char* expected) const {
    NVFP4LM_FAIL("{}: training setting \"{}\" must be {}, found {}", where, key, expected, value.dump());
  }
  std::string text() const {
    if (!value.is_string()) fail("a string");
    return value.get<std::string>();
  }
  // Flag values go through the flag parsers; their Errors are prefixed with the place.
  template <typename Parse>
  auto parsed(Parse parse) const {
    const std::string name = text();
    try {
      return parse(name);
    } catch (const Error& e) {
      NVFP4LM_FAIL("{}: training setting \"{}\": {}", where, key, e.what());
    }
  }

  void operator()(std::string& out) const { out = text(); }
  void operator()(bool& out) const {
    if (!value.is_boolean()) fail("true or false");
    out = value.get<bool>();
  }
  void operator()(int& out) const {
    if (!value.is_number_integer()) fail("an integer");
    out = value.get<int>();
  }
  void operator()(int64_t& out) const {
    if (!value.is_number_integer()) fail("an integer");
    out = value.get<int64_t>();
  }
  void operator()(uint64_t& out) const {
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
      fail("a non-negative integer");
    out = value.get<uint64_t>();
  }
  void operator()(double& out) const {
    if (!value.is_number()) fail("a number");
    out = value.get<double>();
  }
  void operator()(DataFormat& out) const { out = parsed(parse_data_format); }
  void operator()(PairTemplate& out) const { out = parsed(parse_pair_template); }
  void operator()(std::optional<ChatTemplate>& out) const { out = parsed(parse_chat_template_flag); }
  void operator()(QatMode& out) const { out = parsed(parse_qat_mode); }
  void operator()(Nvfp4Block& out) const { out = parsed(parse_block_flag); }
  void operator()(LossKind& out) const { out = parsed(parse_loss_kind); }
  void operator()(Recompute& out) const { out = parsed(parse_recompute); }
  void operator()(LrDecay& out) const { out = parsed(parse_lr_decay); }
  void operator()(ModelFormat& out) const { out = parsed(parse_export_format); }
  void operator()(NonFinitePolicy& out) const { out = parsed(parse_nonfinite); }
};

// "--master fp32" style rendering of a JSON value for messages.
std::string flag_value_text(std::string_view key, const json& value) {
  if (key == "master") return value.get<bool>() ? "bf16" : "fp32";
  if (key == "packing") return value.get<bool>() ? "on" : "off (--no-packing)";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

std::string_view block_flag_name(Nvfp4Block block) { return block == Nvfp4Block::Row1x16 ? "1d" : "2d"; }

Nvfp4Block parse_block_flag(std::string_view name) {
  if (name == "1d") return Nvfp4Block::Row1x16;
  if (name == "2d") return Nvfp4Block::Tile16x16;
  NVFP4LM_FAIL("unknown --block '{}' (choose 1d for 1x16 blocks or 2d for 16x16 tiles)", name);
}

std::string_view export_format_flag_name(ModelFormat format) {
  switch (format) {
    case ModelFormat::ModeloptNvfp4:
      return "modelopt";
    case ModelFormat::Dat:
      return "dat";
    case ModelFormat::HfSafetensors:
      return "bf16";
  }
  return "?";
}

ModelFormat parse_export_format(std::string_view name) {
  for (ModelFormat format : {ModelFormat::ModeloptNvfp4, ModelFormat::Dat, ModelFormat::HfSafetensors})
    if (name == export_format_flag_name(format)) return format;
  NVFP4LM_FAIL("unknown export format '{}' (choose modelopt, dat or bf16)", name);
}

std::string_view nonfinite_name(NonFinitePolicy policy) { return policy == NonFinitePolicy::Skip ? "skip" : "stop"; }

NonFinitePolicy parse_nonfinite(std::string_view name) {
  if (name == "skip") return NonFinitePolicy::Skip;
  if (name == "stop") return NonFinitePolicy::Stop;
  NVFP4LM_FAIL("unknown --nonfinite '{}' (choose skip or stop)", name);
}

std::string_view train_option_flag(std::string_view key) {
  static const std::vector<std::pair<std::string, std::string>> flags = [] {
    std::vector<std::pair<std::string, std::string>> list;
    TrainOptions options;
    for_each_field(options, [&](const char* key, auto&, ResumeGroup) {
      std::string flag = std::string("--") + key;
      for (char& c : flag)
        if (c == '_') c = '-';
      if (std::string_view(key) == "packing") flag = "--no-packing";
      list.emplace_back(key, flag);
    });
    return list;
  }();
  for (const auto& [name, flag] : flags)
    if (name == key) return flag;
  return key;
}

void validate_train_options(const TrainOptions& o) {
  NVFP4LM_CHECK(!o.model.empty(), "--model is required (the model to fine-tune)");
  NVFP4LM_CHECK(!o.data.empty(), "--data is required (the training data file)");
  NVFP4LM_CHECK(o.seq_len >= 2, "--seq-len must be at least 2 tokens, got {}", o.seq_len);
  NVFP4LM_CHECK(o.batch >= 1, "--batch must be at least 1, got {}", o.batch);
  NVFP4LM_CHECK(o.grad_accum >= 1, "--grad-accum must be at least 1, got {}", o.grad_accum);
  NVFP4LM_CHECK(o.max_steps >= 0, "--max-steps must be positive, got {}", o.max_steps);
  NVFP4LM_CHECK(o.max_steps > 0 || o.epochs >= 1, "--epochs must be at least 1, got {}", o.epochs);
  NVFP4LM_CHECK(std::isfinite(o.lr) && o.lr > 0, "--lr must be a positive number, got {}", o.lr);
  NVFP4LM_CHECK(o.warmup >= 0, "--warmup must be >= 0 steps, got {}", o.warmup);
  NVFP4LM_CHECK(std::isfinite(o.min_lr_ratio) && o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1,
                "--min-lr-ratio must be in [0, 1], got {}", o.min_lr_ratio);
  NVFP4LM_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "--weight-decay must be >= 0, got {}",
                o.weight_decay);
  NVFP4LM_CHECK(std::isfinite(o.max_grad_norm), "--max-grad-norm must be a number (<= 0 turns clipping off), got {}",
                o.max_grad_norm);
  NVFP4LM_CHECK(o.optimizer == "adamw" || o.optimizer == "adamw8bit",
                "unknown --optimizer '{}' (choose adamw or adamw8bit)", o.optimizer);
  NVFP4LM_CHECK(o.train_last_layers >= -1, "--train-last-layers must be >= 0 (or -1 for all layers), got {}",
                o.train_last_layers);
  NVFP4LM_CHECK(o.save_every >= 0, "--save-every must be >= 0 steps (0: only at the end), got {}", o.save_every);
  NVFP4LM_CHECK(o.keep >= 1, "--keep must be at least 1 checkpoint, got {}", o.keep);
  NVFP4LM_CHECK(std::isfinite(o.max_memory_gib) && o.max_memory_gib >= 0,
                "--max-memory must be a number of GiB >= 0 (0 = no limit), got {}", o.max_memory_gib);
  NVFP4LM_CHECK(!o.output.empty(), "--output is empty: name the run directory");
  if (o.fused_update) {
    NVFP4LM_CHECK(o.grad_accum == 1,
                  "--fused-update applies each layer's update as soon as its gradient exists, so gradients cannot "
                  "accumulate over micro-batches: use --grad-accum 1 (with a larger --batch), or drop --fused-update");
    NVFP4LM_CHECK(o.max_grad_norm <= 0,
                  "--fused-update updates each layer before the global gradient norm is known, so it cannot clip by "
                  "it: pass --max-grad-norm 0 (the norm is still computed and logged), or drop --fused-update");
  }
  Device::parse(o.device);  // Error names the accepted forms
}

json train_options_to_json(const TrainOptions& options) {
  json out = json::object();
  for_each_field(options, [&](const char* key, const auto& value, ResumeGroup) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) {
      out[key] = is_path_key(key) ? absolute_path(value) : value;
    } else {
      out[key] = encode(value);
    }
  });
  return out;
}

TrainOptions train_options_from_json(const json& value, const std::string& where) {
  NVFP4LM_CHECK(value.is_object(), "{}: training settings must be a JSON object, found {}", where, value.type_name());
  TrainOptions options;
  for_each_field(options, [&](const char* key, auto& field, ResumeGroup) {
    NVFP4LM_CHECK(value.contains(key), "{}: training setting \"{}\" is missing", where, key);
    Decoder{value.at(key), where, key}(field);
  });
  return options;
}

TrainOptions resolve_resume_options(const json& saved, const TrainOptions& current, const std::set<std::string>& given,
                                    const std::string& where) {
  train_options_from_json(saved, where);  // the saved settings must be complete and well-formed
  json merged = saved;
  const json now = train_options_to_json(current);
  std::vector<std::string> schedule_changes;
  TrainOptions probe;
  for_each_field(probe, [&](const char* key, auto&, ResumeGroup group) {
    if (!given.count(key) || merged[key] == now[key]) return;
    const std::string flag(train_option_flag(key));
    switch (group) {
      case ResumeGroup::Identity:
        NVFP4LM_FAIL(
            "--resume: {} is {} but the run in {} was started with {}; a resumed run must keep it (omit {} to "
            "reuse the saved value, or start a new run with another --output)",
            flag, flag_value_text(key, now[key]), where, flag_value_text(key, merged[key]), flag);
      case ResumeGroup::Schedule:
        schedule_changes.push_back(
            fmt::format("{} {} (was {})", flag, flag_value_text(key, now[key]), flag_value_text(key, merged[key])));
        break;
      case ResumeGroup::Free:
        break;
    }
    merged[key] = now[key];
  });
  // --epochs and --max-steps choose the length together: --epochs alone replaces a saved --max-steps.
  if (given.count("epochs") && !given.count("max_steps")) merged["max_steps"] = json(int64_t{0});
  if (!schedule_changes.empty()) {
    log::warn("--resume with a changed schedule: {}; from here on the run differs from an uninterrupted one",
              fmt::join(schedule_changes, ", "));
  }
  TrainOptions resolved = train_options_from_json(merged, where);
  resolved.resume = true;
  resolved.output = current.output;  // the directory the checkpoint was found in (it may have moved)
  return resolved;
}

}  // namespace nvfp4lm
