// The table of `nvfp4lm train` flags (train_flags.h), and the JSON form of one row's value. The rows are in --help
// order; a row's check runs in validate_train_options, in this order too.
#include "train/train_flags.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "core/device.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"
#include "core/memory_guard.h"
#include "io/model_formats.h"
#include "model/lora.h"
#include "tokenizer/chat_template.h"
#include "train/grpo.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

// ---- one JSON value <-> a field ----------------------------------------------------------------------------
[[noreturn]] void wrong_type(const json& value, std::string_view key, const std::string& where, const char* expected) {
  NVFP4LM_FAIL("{}: training setting \"{}\" must be {}, found {}", where, key, expected, json_excerpt(value));
}

template <typename T>
T decode(const json& value, std::string_view key, const std::string& where) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (!value.is_string()) wrong_type(value, key, where, "a string");
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) wrong_type(value, key, where, "true or false");
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
      wrong_type(value, key, where, "a non-negative integer");
  } else if constexpr (std::is_integral_v<T>) {
    // Whole numbers of T only: a value nlohmann would cast (3e9 into an int) is refused, not wrapped.
    if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX}) ||
        value.get<int64_t>() < std::numeric_limits<T>::min() || value.get<int64_t>() > std::numeric_limits<T>::max())
      wrong_type(
          value, key, where,
          fmt::format("an integer in [{}, {}]", std::numeric_limits<T>::min(), std::numeric_limits<T>::max()).c_str());
  } else {
    static_assert(std::is_floating_point_v<T>);
    if (!value.is_number() || !std::isfinite(value.get<double>())) wrong_type(value, key, where, "a finite number");
  }
  return value.get<T>();
}

// ---- value kinds (train_flags.h) ---------------------------------------------------------------------------
TrainFlagText text(std::string TrainOptions::*member) { return {member}; }
TrainFlagText path(std::string TrainOptions::*member) { return {member, true}; }
template <typename T>
TrainFlagNumber<T> number(T TrainOptions::*member, NumberRange<T> range = {}) {
  return {member, range};
}
// A number whose default 0 means "none" and cannot be given (train_flags.h).
template <typename T>
TrainFlagNumber<T> positive_or_unset(T TrainOptions::*member, T max) {
  return {member, {0, max}, true};
}
TrainFlagSwitch switch_on(bool TrainOptions::*member) { return {member}; }
TrainFlagSwitch switch_off(bool TrainOptions::*member) { return {member, true}; }

// `member` chosen by its spelling: name(value) -> spelling, parse(spelling) -> value (an Error otherwise).
template <typename T, typename Parse, typename Name>
TrainFlagChoice choice(T TrainOptions::*member, Parse parse, Name name, std::string_view bare = {}) {
  TrainFlagChoice choice;
  choice.bare = bare;
  choice.text = [=](const TrainOptions& o) { return std::string(name(o.*member)); };
  choice.parse = [=](TrainOptions& o, std::string_view text) { o.*member = parse(text); };
  if constexpr (std::is_same_v<T, bool>) {
    choice.to_json = [=](const TrainOptions& o) { return json(o.*member); };
    choice.from_json = [=](TrainOptions& o, const json& value, std::string_view key, const std::string& where) {
      o.*member = decode<bool>(value, key, where);
    };
  } else {
    choice.to_json = [=](const TrainOptions& o) { return json(std::string(name(o.*member))); };
    choice.from_json = [=](TrainOptions& o, const json& value, std::string_view key, const std::string& where) {
      const std::string text = decode<std::string>(value, key, where);
      try {
        o.*member = parse(text);
      } catch (const Error& e) {
        NVFP4LM_FAIL("{}: training setting \"{}\": {}", where, key, e.what());
      }
    };
  }
  return choice;
}

// --master: TrainOptions::bf16_master (float32 / bfloat16: the spellings of the predecessor's --master-dtype).
std::string_view master_name(bool bf16) { return bf16 ? "bf16" : "fp32"; }
bool parse_master(std::string_view name) {
  if (name == "fp32" || name == "float32") return false;
  if (name == "bf16" || name == "bfloat16") return true;
  NVFP4LM_FAIL("unknown master weight type '{}' (choose fp32 or bf16)", name);
}

// --synthetic true|false.
std::string_view true_false_name(bool value) { return value ? "true" : "false"; }
bool parse_true_false(std::string_view name) {
  if (name == "true") return true;
  if (name == "false") return false;
  NVFP4LM_FAIL("'{}' is not true or false", name);
}

// --resume [always|auto|never], with the predecessor's true (= auto: it resumed when it found a checkpoint) and
// false.
std::string_view resume_mode_name(ResumeMode mode) {
  return mode == ResumeMode::Always ? "always" : mode == ResumeMode::Auto ? "auto" : "never";
}
ResumeMode parse_resume_mode(std::string_view name) {
  if (name == "always") return ResumeMode::Always;
  if (name == "auto" || name == "true") return ResumeMode::Auto;
  if (name == "never" || name == "false") return ResumeMode::Never;
  NVFP4LM_FAIL("unknown resume mode '{}' (choose always, auto or never; true and false mean auto and never)", name);
}

// --in-features / --out-features: sizes of the --synthetic model's NVFP4-quantized linears.
void check_synthetic_size(const TrainOptions& o, std::string_view flag, int64_t size) {
  if (size == 0) return;
  NVFP4LM_CHECK(o.synthetic,
                "{} sets a size of the --synthetic model; a real model's shape is its config.json's "
                "(drop {}, or add --synthetic true)",
                flag, flag);
  NVFP4LM_CHECK(size % 16 == 0, "{} {} must be a multiple of 16 (the NVFP4 block size)", flag, size);
}

using O = TrainOptions;
using G = ResumeGroup;

// --chat-template: auto, the bundled templates' names, or a Jinja file.
std::string make_chat_template_help() {
  std::string names;
  for (std::string_view name : bundled_chat_template_names()) names += fmt::format(", {}", name);
  return fmt::format("auto (the tokenizer's own Jinja template, default){} or a Jinja file", names);
}

std::vector<TrainFlag> make_train_flags() {
  static const std::string chat_template_help = make_chat_template_help();  // the rows keep string_views of it
  return {
      {.name = "--model",
       .aliases = {"--input-dat", "--weight"},
       .help = "model to fine-tune: HF directory, ModelOpt NVFP4 or .dat",
       .key = "model",
       .resume = G::Identity,
       .value = path(&O::model),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.synthetic || !o.model.empty(),
                           "--model is required (the model to fine-tune), or --synthetic true for a random one");
             NVFP4LM_CHECK(!o.synthetic || o.model.empty(),
                           "--synthetic trains a random in-memory model: drop --model {} (or --synthetic)", o.model);
           }},
      {.name = "--synthetic",
       .help = "true: train a random in-memory Qwen3 (the tiny preset's shape; --in-features / --out-features set its "
               "hidden and intermediate sizes) instead of --model; without --data it trains on `nvfp4lm data whoami`'s "
               "data set",
       .key = "synthetic",
       .resume = G::Identity,
       .value = choice(&O::synthetic, parse_true_false, true_false_name, "true"),
       .added_later = true},
      {.name = "--in-features",
       .help = "--synthetic: hidden size of the random model (multiple of 16; 0 = the tiny preset's 64)",
       .key = "in_features",
       .resume = G::Identity,
       .value = number(&O::in_features, {0, int64_t{1} << 16}),
       .check = [](const O& o) { check_synthetic_size(o, "--in-features", o.in_features); },
       .added_later = true},
      {.name = "--out-features",
       .help = "--synthetic: intermediate (MLP) size of the random model (multiple of 16; 0 = the tiny preset's 128)",
       .key = "out_features",
       .resume = G::Identity,
       .value = number(&O::out_features, {0, int64_t{1} << 18}),
       .check = [](const O& o) { check_synthetic_size(o, "--out-features", o.out_features); },
       .added_later = true},
      {.name = "--max-layers",
       .help = "load and train only the first N blocks of the model, a quick smoke test of a large one (default: all)",
       .key = "max_layers",
       .resume = G::Identity,
       .value = positive_or_unset(&O::max_layers, 1 << 16),
       .added_later = true},
      {.name = "--tokenizer",
       .help = "directory with tokenizer.json (default: the model's)",
       .key = "tokenizer",
       .resume = G::Identity,
       .value = path(&O::tokenizer)},
      {.name = "--data",
       .aliases = {"--train-data"},
       .help = "training data: .jsonl (messages or prompt/completion), .tsv, .txt",
       .key = "data",
       .resume = G::Identity,
       .value = path(&O::data),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.synthetic || !o.data.empty(), "--data is required (the training data file)");
           }},
      {.name = "--output",
       .aliases = {"--checkpoint-dir"},
       .help = "run directory for checkpoints and metrics (default runs/train-<date-time>)",
       .key = "output",
       .resume = G::Free,
       .value = path(&O::output),
       .check = [](const O& o) { NVFP4LM_CHECK(!o.output.empty(), "--output is empty: name the run directory"); }},
      {.name = "--qat",
       .help = "w4a16 (default), w4a4 or off (plain training)",
       .key = "qat",
       .resume = G::Identity,
       .value = choice(&O::qat, parse_qat_mode, qat_mode_name)},
      {.name = "--quantize-lm-head",
       .help = "quantize lm_head too",
       .key = "quantize_lm_head",
       .resume = G::Identity,
       .value = switch_on(&O::quantize_lm_head)},
      {.name = "--block",
       .help = "NVFP4 scale blocks: 1d (1x16, default) or 2d (16x16)",
       .key = "block",
       .resume = G::Identity,
       .value = choice(&O::block, parse_block_flag, block_flag_name)},
      {.name = "--loss",
       .aliases = {"--loss-mode"},
       .help = "ce (token cross-entropy, default) or l1 (debug; also spelled scalar)",
       .key = "loss",
       .resume = G::Identity,
       .value = choice(&O::loss, parse_loss_kind, loss_kind_name)},
      {.name = "--distill-from",
       .help = "quantization-aware distillation: train the student towards this frozen model's token distribution "
               "(normally the unquantized base; any model nvfp4lm loads, with the student's vocabulary), its forward "
               "run on the same batches and device; or a teacher cache of `nvfp4lm distill-cache` (its top-K "
               "log-probabilities, no teacher in memory)",
       .key = "distill_from",
       .resume = G::Identity,
       .value = path(&O::distill_from),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.distill_from.empty() || o.loss == LossKind::CrossEntropy,
                           "--distill-from replaces the loss with distillation (mixed with cross-entropy by "
                           "--distill-weight): drop --loss {}",
                           loss_kind_name(o.loss));
           },
       .added_later = true},
      {.name = "--distill-weight",
       .help = "share of the distillation term (temperature² · KL(teacher ‖ student)) in the loss, the rest "
               "cross-entropy with the data's tokens (default 1: distillation only)",
       .key = "distill_weight",
       .resume = G::Identity,
       .value = number(&O::distill_weight),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.distill_weight >= 0 && o.distill_weight <= 1, "--distill-weight must be in [0, 1], got {}",
                           o.distill_weight);
             NVFP4LM_CHECK(o.distill_weight == 1.0 || !o.distill_from.empty(),
                           "--distill-weight mixes the distillation loss of --distill-from TEACHER: add it");
           },
       .added_later = true},
      {.name = "--distill-temperature",
       .help = "softmax temperature of both distributions in the KL term (default 1)",
       .key = "distill_temperature",
       .resume = G::Identity,
       .value = number(&O::distill_temperature),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.distill_temperature) && o.distill_temperature > 0,
                           "--distill-temperature must be positive, got {}", o.distill_temperature);
             NVFP4LM_CHECK(o.distill_temperature == 1.0 || !o.distill_from.empty(),
                           "--distill-temperature sets the distillation loss of --distill-from TEACHER: add it");
           },
       .added_later = true},
      {.name = "--objective",
       .help = "sft (default: cross-entropy on the data's completions), dpo (preference pairs {prompt, chosen, "
               "rejected}: DPO / IPO against the frozen starting model, whose log-probabilities are computed once "
               "before the first step; --batch counts pairs) or grpo (prompts {prompt, ...} and --reward: "
               "--num-generations completions a prompt sampled from the policy's forward weights each step; --batch "
               "counts prompts)",
       .key = "objective",
       .resume = G::Identity,
       .value = choice(&O::objective, parse_train_objective, train_objective_name),
       .check =
           [](const O& o) {
             if (o.objective == TrainObjective::Sft) return;
             const std::string_view name = train_objective_name(o.objective);
             NVFP4LM_CHECK(o.loss == LossKind::CrossEntropy && o.distill_from.empty(),
                           "--objective {} is its own loss: drop {}", name,
                           o.distill_from.empty() ? "--loss " + std::string(loss_kind_name(o.loss))
                                                  : std::string("--distill-from"));
             NVFP4LM_CHECK(o.data_format == DataFormat::Auto || o.data_format == DataFormat::Jsonl,
                           "--objective {} reads JSON lines: drop --data-format {}", name,
                           data_format_name(o.data_format));
             if (o.objective != TrainObjective::Grpo) return;
             NVFP4LM_CHECK(!o.reward.empty(),
                           "--objective grpo needs --reward (exact, regex:PATTERN, json or "
                           "command:CMD)");
             NVFP4LM_CHECK(!o.fused_update && o.calibrate_steps == 0, "--objective grpo: drop {}",
                           o.fused_update ? "--fused-update" : "--calibrate-steps");
           },
       .added_later = true},
      {.name = "--beta",
       .help = "--objective dpo: β, how far the policy may move from the reference (IPO's τ; default 0.1, TRL's); "
               "--objective grpo: the weight of the KL term to the starting model (default 0, TRL's: no reference)",
       .key = "beta",
       .resume = G::Identity,
       .value = number(&O::beta),
       .check =
           [](const O& o) {
             if (o.beta == -1) return;  // unset
             NVFP4LM_CHECK(o.objective == TrainObjective::Dpo || o.objective == TrainObjective::Grpo,
                           "--beta sets the loss of --objective dpo or grpo: add one");
             if (o.objective == TrainObjective::Dpo)
               NVFP4LM_CHECK(std::isfinite(o.beta) && o.beta > 0, "--beta must be positive, got {}", o.beta);
             else
               NVFP4LM_CHECK(std::isfinite(o.beta) && o.beta >= 0, "--beta must be 0 or more, got {}", o.beta);
           },
       .added_later = true},
      {.name = "--dpo-loss",
       .help = "--objective dpo: sigmoid (DPO, default) or ipo, as TRL's loss_type",
       .key = "dpo_loss",
       .resume = G::Identity,
       .value = choice(&O::dpo_loss, parse_preference_loss, preference_loss_name),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.dpo_loss == PreferenceLossType::Sigmoid || o.objective == TrainObjective::Dpo,
                           "--dpo-loss chooses the preference loss of --objective dpo: add it");
           },
       .added_later = true},
      {.name = "--reward",
       .help =
           "--objective grpo: exact (each prompt's \"answer\" against the completion's final answer), "
           "regex:PATTERN (1 when it matches), json (1 for one JSON value) or command:CMD (/bin/sh; a JSON object a "
           "completion on stdin, the prompt's fields and \"completion\"; one number a line on stdout)",
       .key = "reward",
       .resume = G::Identity,
       .value = text(&O::reward),
       .check =
           [](const O& o) {
             if (o.reward.empty()) return;
             NVFP4LM_CHECK(o.objective == TrainObjective::Grpo,
                           "--reward scores the completions of --objective grpo: add it");
             parse_reward_spec(o.reward);
           },
       .added_later = true},
      {.name = "--reward-timeout",
       .help = "--objective grpo: seconds a reward command may take for a step's completions (default 60)",
       .key = "reward_timeout",
       .resume = G::Free,
       .value = number(&O::reward_timeout),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.reward_timeout) && o.reward_timeout > 0,
                           "--reward-timeout must be positive seconds, got {}", o.reward_timeout);
           },
       .added_later = true},
      {.name = "--num-generations",
       .help = "--objective grpo: completions sampled a prompt, the group its advantages are normalized in (default "
               "8, TRL's)",
       .key = "num_generations",
       .resume = G::Identity,
       .value = number(&O::num_generations, {2, 1024}),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.num_generations == 8 || o.objective == TrainObjective::Grpo,
                           "--num-generations sets the groups of --objective grpo: add it");
           },
       .added_later = true},
      {.name = "--max-completion-tokens",
       .help = "--objective grpo: the most tokens a completion may have (default 256)",
       .key = "max_completion_tokens",
       .resume = G::Identity,
       .value = number(&O::max_completion_tokens, {1, int64_t{1} << 20}),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.max_completion_tokens == 256 || o.objective == TrainObjective::Grpo,
                           "--max-completion-tokens bounds the completions of --objective grpo: add it");
           },
       .added_later = true},
      {.name = "--temperature",
       .help = "--objective grpo: sampling temperature of the rollouts, top-k and top-p off (default 1, TRL's)",
       .key = "temperature",
       .resume = G::Identity,
       .value = number(&O::temperature),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.temperature) && o.temperature > 0 && o.temperature <= 10,
                           "--temperature must be in (0, 10], got {}", o.temperature);
             NVFP4LM_CHECK(o.temperature == 1.0 || o.objective == TrainObjective::Grpo,
                           "--temperature samples the rollouts of --objective grpo: add it");
           },
       .added_later = true},
      {.name = "--epsilon",
       .help = "--objective grpo: the clip range's low side, r >= 1 - epsilon (default 0.2, TRL's)",
       .key = "epsilon",
       .resume = G::Identity,
       .value = number(&O::epsilon),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.epsilon) && o.epsilon > 0 && o.epsilon < 1,
                           "--epsilon must be in (0, 1), got {}", o.epsilon);
             NVFP4LM_CHECK(o.epsilon == 0.2 || o.objective == TrainObjective::Grpo,
                           "--epsilon clips the loss of --objective grpo: add it");
           },
       .added_later = true},
      {.name = "--epsilon-high",
       .help = "--objective grpo: the clip range's high side, r <= 1 + epsilon-high (default: --epsilon; DAPO's 0.28)",
       .key = "epsilon_high",
       .resume = G::Identity,
       .value = number(&O::epsilon_high),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.epsilon_high) && o.epsilon_high >= 0,
                           "--epsilon-high must be positive, got {}", o.epsilon_high);
             NVFP4LM_CHECK(o.epsilon_high == 0 || o.objective == TrainObjective::Grpo,
                           "--epsilon-high clips the loss of --objective grpo: add it");
           },
       .added_later = true},
      {.name = "--compute-dtype",
       .help = "activation precision: auto (default: the device's), float32 (the CPU's, exact) or bfloat16 (CUDA's); "
               "float16 is not supported",
       .key = "compute_dtype",
       .resume = G::Free,  // it follows the device, which may change
       .value = choice(&O::compute_dtype, parse_compute_dtype, compute_dtype_name),
       .check = [](const O& o) { check_compute_dtype(o.compute_dtype, o.device); },
       .added_later = true},
      {.name = "--seq-len",
       .help = "tokens per row (default 512)",
       .key = "seq_len",
       .resume = G::Identity,
       .value = number(&O::seq_len, {2, int64_t{1} << 20}),
       .check =
           [](const O& o) { NVFP4LM_CHECK(o.seq_len >= 2, "--seq-len must be at least 2 tokens, got {}", o.seq_len); }},
      {.name = "--batch",
       .aliases = {"--batch-size"},
       .help = "rows per micro-batch (default 4)",
       .key = "batch",
       .resume = G::Identity,
       .value = number(&O::batch, {1, int64_t{1} << 16}),
       .check = [](const O& o) { NVFP4LM_CHECK(o.batch >= 1, "--batch must be at least 1, got {}", o.batch); }},
      {.name = "--grad-accum",
       .help = "micro-batches per optimizer step (default 1)",
       .key = "grad_accum",
       .resume = G::Identity,
       .value = number(&O::grad_accum, {1, int64_t{1} << 16}),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.grad_accum >= 1, "--grad-accum must be at least 1, got {}", o.grad_accum);
           }},
      {.name = "--epochs",
       .help = "passes over the data (default 1)",
       .key = "epochs",
       .resume = G::Schedule,
       .value = number(&O::epochs, {0, int64_t{1} << 20}),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.max_steps > 0 || o.epochs >= 1, "--epochs must be at least 1, got {}", o.epochs);
           }},
      {.name = "--max-steps",
       .aliases = {"--steps"},
       .help = "optimizer steps instead of --epochs",
       .key = "max_steps",
       .resume = G::Schedule,
       .value = positive_or_unset(&O::max_steps, int64_t{1} << 40),
       .check =
           [](const O& o) { NVFP4LM_CHECK(o.max_steps >= 0, "--max-steps must be positive, got {}", o.max_steps); }},
      {.name = "--steps-per-epoch",
       .help = "cap each of --epochs at N optimizer steps, then go on with the next epoch (default: whole epochs)",
       .key = "steps_per_epoch",
       .resume = G::Schedule,
       .value = positive_or_unset(&O::steps_per_epoch, int64_t{1} << 40),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.steps_per_epoch == 0 || o.max_steps == 0,
                           "--steps-per-epoch caps the steps of each of --epochs; with --max-steps the data simply "
                           "repeats: drop one of them");
           },
       .added_later = true},
      {.name = "--lr",
       .help = "peak learning rate (default 1e-5)",
       .key = "lr",
       .resume = G::Schedule,
       .value = number(&O::lr),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.lr) && o.lr > 0, "--lr must be a positive number, got {}", o.lr);
           }},
      {.name = "--lr-schedule",
       .help = "constant, linear or cosine (default)",
       .key = "lr_schedule",
       .resume = G::Schedule,
       .value = choice(&O::lr_schedule, parse_lr_decay, lr_decay_name)},
      {.name = "--warmup",
       .help = "linear warmup steps (default 0)",
       .key = "warmup",
       .resume = G::Schedule,
       .value = number(&O::warmup, {0, int64_t{1} << 40}),
       .check = [](const O& o) { NVFP4LM_CHECK(o.warmup >= 0, "--warmup must be >= 0 steps, got {}", o.warmup); }},
      {.name = "--min-lr-ratio",
       .help = "final lr / peak lr (default 0)",
       .key = "min_lr_ratio",
       .resume = G::Schedule,
       .value = number(&O::min_lr_ratio, {0.0, 1.0}),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.min_lr_ratio) && o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1,
                           "--min-lr-ratio must be in [0, 1], got {}", o.min_lr_ratio);
           }},
      {.name = "--weight-decay",
       .help = "AdamW weight decay (default 0.1)",
       .key = "weight_decay",
       .resume = G::Identity,
       .value = number(&O::weight_decay),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "--weight-decay must be >= 0, got {}",
                           o.weight_decay);
           }},
      {.name = "--max-grad-norm",
       .help = "clip the global grad norm; <= 0 = off (default 1)",
       .key = "max_grad_norm",
       .resume = G::Schedule,
       .value = number(&O::max_grad_norm),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.max_grad_norm),
                           "--max-grad-norm must be a number (<= 0 turns clipping off), got {}", o.max_grad_norm);
           }},
      {.name = "--optimizer",
       .help = "adamw (default) or adamw8bit",
       .key = "optimizer",
       .resume = G::Identity,
       .value = text(&O::optimizer),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.optimizer == "adamw" || o.optimizer == "adamw8bit",
                           "unknown --optimizer '{}' (choose adamw or adamw8bit)", o.optimizer);
           }},
      {.name = "--master",
       .help = "master weights: fp32 (default) or bf16",
       .key = "master",
       .resume = G::Identity,
       .value = choice(&O::bf16_master, parse_master, master_name)},
      {.name = "--step-chunk-rows",
       .aliases = {"--optimizer-step-chunk-rows"},
       .help = "update each parameter N rows at a time (0 = whole, default); the update allocates nothing either way, "
               "so this bounds the work of one update launch, not memory: --fused-update is the low-memory mode",
       .key = "step_chunk_rows",
       .resume = G::Free,  // the same updates, bit for bit
       .value = number(&O::step_chunk_rows, {0, int64_t{1} << 40}),
       .added_later = true},
      {.name = "--recompute",
       .help = "none (default) or block: keep only each block's input and re-run its forward in the backward (less "
               "memory, one more forward)",
       .key = "recompute",
       .resume = G::Free,  // memory for compute; the gradients are the same
       .value = choice(&O::recompute, parse_recompute, recompute_name)},
      {.name = "--fused-update",
       .help = "apply each layer's optimizer update inside the backward, keeping one layer's gradients (needs "
               "--grad-accum 1 and --max-grad-norm 0)",
       .key = "fused_update",
       .resume = G::Free,  // the same updates (no clipping either way), less memory
       .value = switch_on(&O::fused_update),
       .check =
           [](const O& o) {
             if (!o.fused_update) return;
             NVFP4LM_CHECK(o.grad_accum == 1,
                           "--fused-update applies each layer's update as soon as its gradient exists, so gradients "
                           "cannot accumulate over micro-batches: use --grad-accum 1 (with a larger --batch), or "
                           "drop --fused-update");
             NVFP4LM_CHECK(o.max_grad_norm <= 0,
                           "--fused-update updates each layer before the global gradient norm is known, so it cannot "
                           "clip by it: pass --max-grad-norm 0 (the norm is still computed and logged), or drop "
                           "--fused-update");
           }},
      {.name = "--packed-weights",
       .help = "QAT: keep the forward's NVFP4 weights packed and dequantize one block at a time (same results, ~3.5x "
               "less memory for them)",
       .key = "packed_weights",
       .resume = G::Free,  // the same forward weights, less memory
       .value = switch_on(&O::packed_weights)},
      {.name = "--train-last-layers",
       .help = "train only the last N layers; N <= 0 trains every parameter (default -1)",
       .key = "train_last_layers",
       .resume = G::Identity,
       .value = number(&O::train_last_layers, {-(1 << 16), 1 << 16})},
      {.name = "--lora",
       .help = "LoRA: train rank-R adapters over the frozen base (NVFP4 bases stay packed as stored) instead of every "
               "weight (default 0: full-parameter training); --export writes the adapter in PEFT's format",
       .key = "lora",
       .resume = G::Identity,
       .value = number(&O::lora_rank, {0, 4096}),
       .check =
           [](const O& o) {
             if (o.lora_rank == 0) return;
             NVFP4LM_CHECK(!o.bf16_master, "--lora keeps the adapters' masters in fp32: drop --master bf16");
             NVFP4LM_CHECK(!o.quantize_lm_head, "--lora keeps lm_head as stored and frozen: drop --quantize-lm-head");
             NVFP4LM_CHECK(o.calibrate_steps == 0,
                           "--calibrate-steps records ranges for a full NVFP4 export; a LoRA run exports its adapter: "
                           "drop --calibrate-steps");
             NVFP4LM_CHECK(o.output_dat.empty() && o.export_format == ModelFormat::ModeloptNvfp4,
                           "a LoRA run exports its adapter (PEFT's adapter_config.json + adapter_model.safetensors) "
                           "with --export DIR; --output-dat and --export-format write whole models, which a LoRA run "
                           "does not have: drop them");
           },
       .added_later = true},
      {.name = "--lora-alpha",
       .help = "LoRA scaling numerator: adapters add (alpha / R) · B·A·x (default 0: alpha = R, a scale of 1)",
       .key = "lora_alpha",
       .resume = G::Identity,
       .value = number(&O::lora_alpha),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.lora_alpha) && o.lora_alpha >= 0, "--lora-alpha must be >= 0, got {}",
                           o.lora_alpha);
             NVFP4LM_CHECK(o.lora_alpha == 0 || o.lora_rank > 0,
                           "--lora-alpha scales the adapters of --lora R: add it");
           },
       .added_later = true},
      {.name = "--lora-dropout",
       .help = "LoRA: dropout on the adapters' inputs while training, PEFT's lora_dropout (default 0)",
       .key = "lora_dropout",
       .resume = G::Identity,
       .value = number(&O::lora_dropout),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.lora_dropout) && o.lora_dropout >= 0 && o.lora_dropout < 1,
                           "--lora-dropout must be in [0, 1), got {}", o.lora_dropout);
             NVFP4LM_CHECK(o.lora_dropout == 0 || o.lora_rank > 0,
                           "--lora-dropout drops the inputs of --lora R's adapters: add it");
           },
       .added_later = true},
      {.name = "--lora-targets",
       .help = "the linears that get adapters, a comma list of q, k, v, o, gate, up, down (default all)",
       .key = "lora_targets",
       .resume = G::Identity,
       .value = text(&O::lora_targets),
       .check =
           [](const O& o) {
             parse_lora_targets(o.lora_targets);
             NVFP4LM_CHECK(o.lora_targets == "all" || o.lora_rank > 0,
                           "--lora-targets chooses the linears of --lora R's adapters: add it");
           },
       .added_later = true},
      {.name = "--save-every",
       .aliases = {"--save-every-steps"},
       .help = "checkpoint every N steps (default: at the end)",
       .key = "save_every",
       .resume = G::Free,
       .value = positive_or_unset(&O::save_every, int64_t{1} << 40),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.save_every >= 0, "--save-every must be >= 0 steps (0: only at the end), got {}",
                           o.save_every);
           }},
      {.name = "--keep",
       .help = "checkpoints to keep (default 2)",
       .key = "keep",
       .resume = G::Free,
       .value = number(&O::keep, {1, 1 << 20}),
       .check = [](const O& o) { NVFP4LM_CHECK(o.keep >= 1, "--keep must be at least 1 checkpoint, got {}", o.keep); }},
      {.name = "--eval-data",
       .help = "evaluate on this file (any --data format, rendered and cut like the training data)",
       .key = "eval_data",
       .resume = G::Identity,
       .value = path(&O::eval_data),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.eval_data.empty() || o.eval_split == 0,
                           "pass --eval-data FILE or --eval-split F, not both");
           },
       .added_later = true},
      {.name = "--eval-split",
       .help = "hold out this fraction of the training samples for evaluation, every 1/F-th one (default 0: none)",
       .key = "eval_split",
       .resume = G::Identity,
       .value = number(&O::eval_split, {0.0, 0.5}),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.eval_split) && o.eval_split >= 0 && o.eval_split <= 0.5,
                           "--eval-split must be a fraction in [0, 0.5], got {}", o.eval_split);
           },
       .added_later = true},
      {.name = "--eval-every",
       .help = "evaluate every N steps (default 0: at the end only; always at the end)",
       .key = "eval_every",
       .resume = G::Free,
       .value = number(&O::eval_every, {0, int64_t{1} << 40}),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.eval_every == 0 || o.has_eval(),
                           "--eval-every needs evaluation data: add --eval-data FILE or --eval-split F");
           },
       .added_later = true},
      {.name = "--save-best",
       .help = "also keep the checkpoint with the lowest evaluation loss (saved when it is reached)",
       .key = "save_best",
       .resume = G::Free,
       .value = switch_on(&O::save_best),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(!o.save_best || o.has_eval(),
                           "--save-best needs evaluation data: add --eval-data FILE or --eval-split F (and "
                           "--eval-every N to evaluate during the run)");
           },
       .added_later = true},
      {.name = "--resume",
       .help = "continue the run in --output from its newest complete checkpoint: --resume alone (or always) "
               "requires one; auto (or true) starts a new run when there is none; never (or false, the default) "
               "does not resume",
       .resume = G::NotSaved,
       .value = choice(&O::resume_mode, parse_resume_mode, resume_mode_name, "always")},
      {.name = "--export",
       .help = "export the trained model here at the end",
       .key = "export",
       .resume = G::Free,
       .value = path(&O::export_path)},
      {.name = "--output-dat",
       .help = "export the trained model at the end as this one NVFP4 .dat file, with config.json and the tokenizer "
               "files beside it (the F# predecessor's layout)",
       .key = "output_dat",
       .resume = G::Free,
       .value = path(&O::output_dat),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(o.output_dat.empty() || o.export_path.empty(),
                           "--output-dat and --export both name the export: give one");
             NVFP4LM_CHECK(
                 o.output_dat.empty() || fs::path(o.output_dat).extension() == ".dat",
                 "--output-dat {}: name a .dat file (the weights; config.json and the tokenizer go beside it), "
                 "or use --export DIR for a model directory",
                 o.output_dat);
           },
       .added_later = true},
      {.name = "--export-format",
       .help = "modelopt (NVFP4, default), compressed-tensors (NVFP4, llm-compressor's layout), dat (NVFP4) or bf16",
       .key = "export_format",
       .resume = G::Free,
       .value = choice(&O::export_format, parse_export_format, export_format_flag_name)},
      {.name = "--calibrate-steps",
       .help = "record each linear's input range during the last N steps, for the input_scale of the ModelOpt "
               "export (default 0: none)",
       .key = "calibrate_steps",
       .resume = G::Free,
       .value = number(&O::calibrate_steps, {0, int64_t{1} << 40}),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(
                 o.calibrate_steps == 0 || o.export_path.empty() ||
                     format_capabilities(o.export_format).activation_scales,
                 "--calibrate-steps records activation scales for the input scales of a ModelOpt or compressed-tensors "
                 "export; --export-format {} stores none: use --export-format modelopt or compressed-tensors, or drop "
                 "--calibrate-steps",
                 export_format_flag_name(o.export_format));
           },
       .added_later = true},
      {.name = "--overwrite",
       .help = "let --export, --output-dat, --metrics and --memory-report replace an existing model or file",
       .key = "overwrite",
       .resume = G::Free,
       .value = switch_on(&O::overwrite)},
      {.name = "--seed",
       .help = "data order and stochastic rounding seed (default 0)",
       .key = "seed",
       .resume = G::Identity,
       .value = number(&O::seed)},
      {.name = "--device",
       .help = "cpu (default), cuda or cuda:N",
       .key = "device",
       .resume = G::Free,
       .value = text(&O::device),
       .check = [](const O& o) { Device::parse(o.device); }},  // Error names the accepted forms
      {.name = "--max-memory",
       .help = "fail instead of allocating more than this many GiB on the device (default: no limit)",
       .key = "max_memory",
       .resume = G::Free,
       .value = number(&O::max_memory_gib, {0.0, 1e6}),
       .check =
           [](const O& o) {
             NVFP4LM_CHECK(std::isfinite(o.max_memory_gib) && o.max_memory_gib >= 0,
                           "--max-memory must be a number of GiB >= 0 (0 = no limit), got {}", o.max_memory_gib);
           }},
      {.name = "--gpu-limit-gb",
       .help = "the predecessor's guard: stop the run (its last checkpoint kept) when the GPU's memory in use, as "
               "the driver reports it, is over this many GiB (default: no guard)",
       .key = "gpu_limit_gb",
       .resume = G::Free,
       .value = number(&O::gpu_limit_gb, {0.0, 1e6}),
       .check =
           [](const O& o) {
             check_memory_guard_options(
                 {.limit_gib = o.gpu_limit_gb, .over_seconds = o.gpu_over_secs, .poll_seconds = o.gpu_poll_secs});
           },
       .added_later = true},
      {.name = "--gpu-over-secs",
       .help = "--gpu-limit-gb: seconds over the limit before the run is stopped (default 0: at once)",
       .key = "gpu_over_secs",
       .resume = G::Free,
       .value = number(&O::gpu_over_secs, {0.0, 1e6}),
       .added_later = true},
      {.name = "--gpu-poll-secs",
       .help = "--gpu-limit-gb: seconds between readings (default 0.5; every new device allocation is read too)",
       .key = "gpu_poll_secs",
       .resume = G::Free,
       .value = number(&O::gpu_poll_secs, {0.05, 3600.0}),
       .added_later = true},
      {.name = "--metrics",
       .help = "JSONL metrics file (default RUN_DIR/metrics.jsonl)",
       .key = "metrics",
       .resume = G::Free,
       .value = path(&O::metrics)},
      {.name = "--memory-report",
       .aliases = {"--vram-report", "--train-step-vram-report"},
       .help = "write peak memory per phase to this JSON file",
       .key = "memory_report",
       .resume = G::Free,
       .value = path(&O::memory_report)},
      {.name = "--nonfinite",
       .help = "on a NaN/inf loss or gradient: skip the step (default) or stop",
       .key = "nonfinite",
       .resume = G::Free,
       .value = choice(&O::nonfinite, parse_nonfinite, nonfinite_name)},
      {.name = "--data-format",
       .help = "auto (by extension, default), jsonl, tsv, text",
       .key = "data_format",
       .resume = G::Identity,
       .value = choice(&O::data_format, parse_data_format, data_format_name)},
      {.name = "--data-template",
       .help = "prompt/target pairs: chat (default) or raw",
       .key = "data_template",
       .resume = G::Identity,
       .value = choice(&O::data_template, parse_pair_template, pair_template_name)},
      {.name = "--strict",
       .help = "truncated or untrainable samples are errors",
       .key = "strict",
       .resume = G::Identity,
       .value = switch_on(&O::strict)},
      {.name = "--train-on-everything",
       .help = "loss on every token, prompts included",
       .key = "train_on_everything",
       .resume = G::Identity,
       .value = switch_on(&O::train_on_everything)},
      {.name = "--no-packing",
       .help = "one sample per row instead of packing",
       .key = "packing",
       .resume = G::Identity,
       .value = switch_off(&O::packing)},
      {.name = "--chat-template",
       .help = chat_template_help,
       .key = "chat_template",
       .resume = G::Identity,
       .value = text(&O::chat_template)},
      {.name = "--no-train-reasoning",
       .help = "no loss on the reasoning (think block) of assistant turns; their answers and tool calls are trained",
       .key = "train_reasoning",
       .resume = G::Identity,
       .value = switch_off(&O::train_reasoning),
       .added_later = true},
  };
}

}  // namespace

const std::vector<TrainFlag>& train_flags() {
  static const std::vector<TrainFlag> flags = make_train_flags();
  return flags;
}

const TrainFlag& train_flag(std::string_view key) {
  for (const TrainFlag& flag : train_flags())
    if (flag.saved() && flag.key == key) return flag;
  internal_error("train_flag(key)", __FILE__, __LINE__, fmt::format("no training flag has the key \"{}\"", key));
}

json train_flag_to_json(const TrainFlag& flag, const TrainOptions& options) {
  return std::visit(
      [&](const auto& value) -> json {
        using Kind = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<Kind, TrainFlagChoice>) {
          return value.to_json(options);
        } else if constexpr (std::is_same_v<Kind, TrainFlagText>) {
          // Stored absolute, so a run resumes from any working directory (core/files.h real_path).
          const std::string& text = options.*value.member;
          return value.path && !text.empty() ? real_path(text).string() : text;
        } else {  // numbers and switches
          return options.*value.member;
        }
      },
      flag.value);
}

void train_flag_from_json(const TrainFlag& flag, TrainOptions& options, const json& value, const std::string& where) {
  std::visit(
      [&](const auto& field) {
        if constexpr (std::is_same_v<std::decay_t<decltype(field)>, TrainFlagChoice>) {
          field.from_json(options, value, flag.key, where);
        } else {  // text, numbers and switches
          using T = std::decay_t<decltype(options.*field.member)>;
          options.*field.member = decode<T>(value, flag.key, where);
          if constexpr (std::is_same_v<std::decay_t<decltype(field)>, TrainFlagNumber<T>>) {
            const T number = options.*field.member;
            NVFP4LM_CHECK(number >= field.range.min && number <= field.range.max,
                          "{}: training setting \"{}\" is {}, expected {}", where, flag.key, number,
                          number_range_text(field.range));
          }
        }
      },
      flag.value);
}

std::string train_flag_value_text(const TrainFlag& flag, const json& value) {
  if (const auto* choice = std::get_if<TrainFlagChoice>(&flag.value)) {
    TrainOptions probe;
    choice->from_json(probe, value, flag.key, "");
    return choice->text(probe);
  }
  if (const auto* flag_switch = std::get_if<TrainFlagSwitch>(&flag.value); flag_switch && flag_switch->negated)
    return value.get<bool>() ? "on" : fmt::format("off ({})", flag.name);
  return value.is_string() ? value.get<std::string>() : json_excerpt(value, 200);
}

}  // namespace nvfp4lm
