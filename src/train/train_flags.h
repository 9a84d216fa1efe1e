// The flags of `nvfp4lm train`, one row each: the flag's name (and aliases), its help text, the TrainOptions field
// it sets and how its value is read, its check, its trainer_state.json key and its resume group. Everything else is
// built from these rows: the CLI options (cli/train_flags_cli.h, in table order, which is the --help order), the
// JSON form of TrainOptions and the resume rules (train_options.h), validate_train_options. A new option is a new
// TrainOptions field and one row here; an alias is one more entry in its row's `aliases`.
//
// Defaults: the TrainOptions member initializers (train_options.h); help texts say them in words
// (tests/train/test_train_flags.cpp checks that they agree).
//
// Values:
//   TrainFlagText    a string field ("--device cuda"); a path is stored absolute in trainer_state.json;
//   TrainFlagNumber  an integer or floating-point field ("--seq-len 512"), parsed by the CLI as its C++ type;
//   TrainFlagSwitch  a bool field set by giving the flag ("--strict"), or cleared by it ("--no-packing");
//   TrainFlagChoice  one of a few spellings ("--qat w4a16"): kept as text while the command line is parsed, then
//                    converted by `parse`, whose Error names the value and the choices, so a bad value gets
//                    nvfp4lm's one-line error; stored as its spelling (a bool field as itself: "master": true).
//                    A choice with a `bare` spelling may also be given without a value ("--resume" = "--resume
//                    always"), as the F# predecessor's "--resume true" and "--synthetic true" need a value.
//
// Rows added after trainer_state.json files existed are `added_later`: an older file without their key reads back
// as the TrainOptions default (what those runs did), not as an Error.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/number_text.h"
#include "train/train_options.h"

namespace nvfp4lm {

// How a setting may change on --resume (train_options.h): Identity (an Error), Schedule (a warning), Free; NotSaved
// for --resume itself, which is what the run does, not a setting of it (no trainer_state.json key).
enum class ResumeGroup { Identity, Schedule, Free, NotSaved };

struct TrainFlagText {
  std::string TrainOptions::*member;
  bool path = false;  // stored absolute, so a run can be resumed from another working directory
};

template <typename T>
struct TrainFlagNumber {
  T TrainOptions::*member;
  // What the flag and trainer_state.json accept (core/number_text.h); the row's check adds the rules that
  // depend on other settings.
  NumberRange<T> range = {};
  // The default 0 means "none" (no cap, every layer): the flag itself takes only positive values.
  bool zero_is_unset = false;
};

struct TrainFlagSwitch {
  bool TrainOptions::*member;
  bool negated = false;  // "--no-packing": giving the flag sets the field to false
};

struct TrainFlagChoice {
  std::function<std::string(const TrainOptions&)> text;        // the field as its flag spelling ("w4a16")
  std::function<void(TrainOptions&, std::string_view)> parse;  // sets the field; Error naming value and choices
  std::function<nlohmann::json(const TrainOptions&)> to_json;  // see "Values" above
  std::function<void(TrainOptions&, const nlohmann::json&, std::string_view key, const std::string& where)> from_json;
  std::string_view bare = {};  // non-empty: the flag may be given alone, meaning this spelling
};

using TrainFlagValue =
    std::variant<TrainFlagText, TrainFlagNumber<int>, TrainFlagNumber<int64_t>, TrainFlagNumber<uint64_t>,
                 TrainFlagNumber<double>, TrainFlagSwitch, TrainFlagChoice>;

struct TrainFlag {
  std::string_view name;                       // "--seq-len": the spelling of messages
  std::vector<std::string_view> aliases = {};  // other spellings of the same flag, listed in its help entry
  std::string_view help;
  std::string_view key = {};  // trainer_state.json key, and the name of the flag in `given` (resolve_resume_options)
  ResumeGroup resume = ResumeGroup::Identity;
  TrainFlagValue value;
  // Error naming the flag and the accepted values, for a value (or a combination with other settings) that
  // cannot run; empty when every value can.
  std::function<void(const TrainOptions&)> check = {};
  // A row added after trainer_state.json's first layout: a saved config without its key reads as the default, so
  // runs of earlier versions still resume and export.
  bool added_later = false;

  bool saved() const { return resume != ResumeGroup::NotSaved; }
};

// Every row, in --help order.
const std::vector<TrainFlag>& train_flags();
// The row with this key; an unknown key is a programming error.
const TrainFlag& train_flag(std::string_view key);

// The row's field as trainer_state.json holds it, and back (Error naming `where`, the key and what was wrong).
nlohmann::json train_flag_to_json(const TrainFlag& flag, const TrainOptions& options);
void train_flag_from_json(const TrainFlag& flag, TrainOptions& options, const nlohmann::json& value,
                          const std::string& where);
// A JSON value of the row as the user would give it, for messages: "w4a16", "bf16" (for "master": true), "64",
// "off (--no-packing)".
std::string train_flag_value_text(const TrainFlag& flag, const nlohmann::json& value);

}  // namespace nvfp4lm
