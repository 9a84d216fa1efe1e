// The training flag table (train/train_flags.h): every row is complete (name, help, key) and unique; keys follow
// the flag names; each help text that states a default states the TrainOptions default; every setting round-trips
// through its trainer_state.json form, and a config written before the table existed still reads back unchanged;
// the resume groups are the documented ones (train_options.h); value texts of resume messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "common/test_util.h"
#include "train/train_flags.h"

namespace nvfp4lm::test_train_flags {
namespace {

using json = nlohmann::json;

TEST(TrainFlags, EveryRowHasANameHelpAndKeyAndNoneRepeats) {
  std::set<std::string> names, keys;
  for (const TrainFlag& flag : train_flags()) {
    const std::string name(flag.name);
    EXPECT_EQ(name.rfind("--", 0), 0u) << name;
    EXPECT_FALSE(flag.help.empty()) << name;
    EXPECT_TRUE(names.insert(name).second) << name << " is declared twice";
    for (std::string_view alias : flag.aliases) {
      EXPECT_EQ(alias.rfind("--", 0), 0u) << name << " alias " << alias;
      EXPECT_TRUE(names.insert(std::string(alias)).second) << alias << " is declared twice";
    }
    if (!flag.saved()) {
      EXPECT_TRUE(flag.key.empty()) << name;
      continue;
    }
    EXPECT_TRUE(keys.insert(std::string(flag.key)).second) << flag.key << " is declared twice";
    // The key is the flag with '_' for '-' ("seq_len" for --seq-len); a negated switch stores the positive
    // setting ("packing" for --no-packing).
    std::string expected = name.substr(2);
    const auto* flag_switch = std::get_if<TrainFlagSwitch>(&flag.value);
    if (flag_switch && flag_switch->negated) {
      ASSERT_EQ(expected.rfind("no-", 0), 0u) << name << ": a negated switch is spelled --no-KEY";
      expected = expected.substr(3);
    }
    std::replace(expected.begin(), expected.end(), '-', '_');
    EXPECT_EQ(flag.key, expected) << name;
    EXPECT_EQ(train_option_flag(flag.key), flag.name);
    EXPECT_EQ(&train_flag(flag.key), &flag);
  }
  EXPECT_EQ(names.count("--resume"), 1u);
}

// "(default 512)" in a help text is the TrainOptions default; a choice's default spelling comes before the word
// "default" ("w4a16 (default), w4a4 or off").
TEST(TrainFlags, HelpTextsStateTheDefaultsOfTrainOptions) {
  const TrainOptions defaults;
  const std::regex number(R"(\(default ([-+0-9.e]+)\))");
  int checked = 0;
  for (const TrainFlag& flag : train_flags()) {
    const std::string help(flag.help);
    std::smatch match;
    if (std::regex_search(help, match, number)) {
      const json value = train_flag_to_json(flag, defaults);
      ASSERT_TRUE(value.is_number()) << flag.name;
      EXPECT_EQ(std::stod(match[1].str()), value.get<double>()) << flag.name << ": " << help;
      ++checked;
    }
    if (const auto* choice = std::get_if<TrainFlagChoice>(&flag.value); choice && help.find("default") != help.npos) {
      const size_t spelling = help.find(choice->text(defaults));
      EXPECT_LT(spelling, help.find("default"))
          << flag.name << ": the default is " << choice->text(defaults) << ", help: " << help;
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

// A non-default value for every setting: texts and paths, numbers and switches by kind, choices from this list
// (a new choice row needs an entry here).
TrainOptions changed_options() {
  const std::map<std::string, std::string> other_spelling = {{"qat", "w4a4"},
                                                             {"block", "2d"},
                                                             {"loss", "l1"},
                                                             {"lr_schedule", "linear"},
                                                             {"master", "bf16"},
                                                             {"recompute", "block"},
                                                             {"export_format", "dat"},
                                                             {"nonfinite", "stop"},
                                                             {"data_format", "tsv"},
                                                             {"data_template", "raw"},
                                                             {"chat_template", "hybrid-thinking"},
                                                             {"synthetic", "true"},
                                                             {"compute_dtype", "float32"},
                                                             {"objective", "dpo"},
                                                             {"dpo_loss", "ipo"}};
  TrainOptions options;
  for (const TrainFlag& flag : train_flags()) {
    std::visit(
        [&](const auto& value) {
          using Kind = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<Kind, TrainFlagText>) {
            options.*value.member = value.path ? "/nonexistent/" + std::string(flag.key) : "changed";
          } else if constexpr (std::is_same_v<Kind, TrainFlagSwitch>) {
            options.*value.member = !(options.*value.member);
          } else if constexpr (std::is_same_v<Kind, TrainFlagChoice>) {
            if (!flag.saved()) return;  // --resume: what the run does, not a setting of it
            auto it = other_spelling.find(std::string(flag.key));
            ASSERT_NE(it, other_spelling.end()) << flag.name << ": add a non-default spelling to this test";
            value.parse(options, it->second);
          } else {  // another value inside the row's range
            auto& field = options.*value.member;
            using T = std::decay_t<decltype(field)>;
            T next = static_cast<T>(field + 3);
            if (next < value.range.min || next > value.range.max)
              next = field == value.range.min ? value.range.max : value.range.min;
            field = next;
          }
        },
        flag.value);
  }
  return options;
}

TEST(TrainFlags, EverySettingRoundTripsThroughJson) {
  const TrainOptions defaults, changed = changed_options();
  const json default_json = train_options_to_json(defaults), changed_json = train_options_to_json(changed);
  size_t saved = 0;
  for (const TrainFlag& flag : train_flags()) {
    if (!flag.saved()) continue;
    ++saved;
    const std::string key(flag.key);
    ASSERT_TRUE(changed_json.contains(key)) << key;
    EXPECT_NE(changed_json[key], default_json[key]) << key << " did not change";
  }
  EXPECT_EQ(changed_json.size(), saved);
  EXPECT_EQ(train_options_to_json(train_options_from_json(changed_json, "test")), changed_json);
  EXPECT_EQ(train_options_to_json(train_options_from_json(default_json, "test")), default_json);
}

// The "config" of a trainer_state.json written before the flag table (every key and value spelled as then).
TEST(TrainFlags, AConfigOfAnEarlierVersionReadsBackUnchanged) {
  const json config = json::parse(R"({
      "batch": 2, "block": "2d", "chat_template": "auto", "data": "/nonexistent/run/d.jsonl", "data_format": "auto",
      "data_template": "chat", "device": "cpu", "epochs": 1, "export": "", "export_format": "modelopt",
      "fused_update": false, "grad_accum": 1, "keep": 2, "loss": "ce", "lr": 0.002, "lr_schedule": "cosine",
      "master": true, "max_grad_norm": 1.0, "max_memory": 0.0, "max_steps": 4, "memory_report": "", "metrics": "",
      "min_lr_ratio": 0.0, "model": "/nonexistent/qwen3-tiny", "nonfinite": "skip", "optimizer": "adamw",
      "output": "/nonexistent/run/r", "overwrite": false, "packed_weights": false, "packing": false, "qat": "w4a16",
      "quantize_lm_head": false, "recompute": "none", "save_every": 2, "seed": 5, "seq_len": 64, "strict": false,
      "tokenizer": "/nonexistent/tiny-tokenizer", "train_last_layers": -1, "train_on_everything": false,
      "warmup": 1, "weight_decay": 0.1})");
  const TrainOptions options = train_options_from_json(config, "step-4");
  EXPECT_TRUE(options.bf16_master);
  EXPECT_FALSE(options.packing);
  EXPECT_EQ(options.block, Nvfp4Block::Tile16x16);
  EXPECT_EQ(options.seq_len, 64);
  // Every key it has reads back as it was; the rows added since (TrainFlag::added_later) read as their defaults.
  const json back = train_options_to_json(options), defaults = train_options_to_json(TrainOptions{});
  // model_as_typed is no flag: an earlier config lacks it and names the model by its saved (absolute) path.
  EXPECT_EQ(back["model_as_typed"], config["model"]);
  for (const auto& [key, value] : back.items()) {
    if (key == "model_as_typed") continue;
    if (config.contains(key)) {
      EXPECT_EQ(value, config[key]) << key;
    } else {
      EXPECT_TRUE(train_flag(key).added_later) << key << " is missing from the earlier config but not added_later";
      EXPECT_EQ(value, defaults[key]) << key;
    }
  }
  EXPECT_FALSE(options.has_eval());
  // A resume of such a run with one of the later flags given again: the saved config gains the default first.
  TrainOptions now = options;
  now.eval_every = 0;
  EXPECT_NO_THROW(resolve_resume_options(config, now, {"eval_every", "seed"}, "step-4"));
  for (const auto& [key, value] : config.items()) EXPECT_TRUE(back.contains(key)) << key;

  json missing = config;
  missing.erase("seed");
  test::expect_error([&] { train_options_from_json(missing, "step-4"); }, {"step-4", "\"seed\"", "missing"});
  json wrong = config;
  wrong["qat"] = "w3a8";
  test::expect_error([&] { train_options_from_json(wrong, "step-4"); }, {"step-4", "\"qat\"", "w3a8"});
  wrong = config;
  wrong["master"] = "bf16";
  test::expect_error([&] { train_options_from_json(wrong, "step-4"); }, {"\"master\"", "true or false"});
}

TEST(TrainFlags, ResumeGroupsAreTheDocumentedOnes) {
  const std::set<std::string> schedule = {"epochs",      "max_steps", "steps_per_epoch", "lr",
                                          "lr_schedule", "warmup",    "min_lr_ratio",    "max_grad_norm"};
  const std::set<std::string> free = {
      "output",    "save_every",      "keep",          "export",         "output_dat",      "export_format",
      "overwrite", "device",          "compute_dtype", "max_memory",     "metrics",         "memory_report",
      "nonfinite", "recompute",       "fused_update",  "packed_weights", "step_chunk_rows", "eval_every",
      "save_best", "calibrate_steps", "gpu_limit_gb",  "gpu_over_secs",  "gpu_poll_secs",   "reward_timeout"};
  for (const TrainFlag& flag : train_flags()) {
    const std::string key(flag.key);
    const ResumeGroup expected = !flag.saved()         ? ResumeGroup::NotSaved
                                 : schedule.count(key) ? ResumeGroup::Schedule
                                 : free.count(key)     ? ResumeGroup::Free
                                                       : ResumeGroup::Identity;
    EXPECT_EQ(flag.resume, expected) << flag.name;
  }
}

TEST(TrainFlags, ValueTextsAreSpelledAsFlags) {
  EXPECT_EQ(train_flag_value_text(train_flag("master"), true), "bf16");
  EXPECT_EQ(train_flag_value_text(train_flag("master"), false), "fp32");
  EXPECT_EQ(train_flag_value_text(train_flag("packing"), true), "on");
  EXPECT_EQ(train_flag_value_text(train_flag("packing"), false), "off (--no-packing)");
  EXPECT_EQ(train_flag_value_text(train_flag("qat"), "w4a4"), "w4a4");
  EXPECT_EQ(train_flag_value_text(train_flag("seq_len"), 64), "64");
  EXPECT_EQ(train_flag_value_text(train_flag("strict"), true), "true");
}

// The F# predecessor's spellings of values: --loss scalar, --master float32 / bfloat16, --resume true / false.
TEST(TrainFlags, ThePredecessorsValueSpellingsMeanTheSameSettings) {
  TrainOptions options;
  std::get<TrainFlagChoice>(train_flag("loss").value).parse(options, "scalar");
  EXPECT_EQ(options.loss, LossKind::L1);
  std::get<TrainFlagChoice>(train_flag("master").value).parse(options, "bfloat16");
  EXPECT_TRUE(options.bf16_master);
  std::get<TrainFlagChoice>(train_flag("master").value).parse(options, "float32");
  EXPECT_FALSE(options.bf16_master);
  for (const TrainFlag& flag : train_flags()) {
    if (flag.name != "--resume") continue;
    const auto& resume = std::get<TrainFlagChoice>(flag.value);
    EXPECT_EQ(resume.bare, "always");
    resume.parse(options, "true");
    EXPECT_EQ(options.resume_mode, ResumeMode::Auto);
    resume.parse(options, "false");
    EXPECT_EQ(options.resume_mode, ResumeMode::Never);
    resume.parse(options, "always");
    EXPECT_EQ(options.resume_mode, ResumeMode::Always);
  }
}

}  // namespace
}  // namespace nvfp4lm::test_train_flags
