// One flag of the command line as a row (as llama.cpp's common/arg.cpp keeps the flags of every tool in one table):
// its names, its help text and how its value is read. Rows that several commands take are defined once
// (cli/flag_rows.h); `train`'s rows are made from the training flag table (cli/train_flags_cli.h). A command's flag
// table lists the rows it takes, each bound to a field of the command's options (FlagUse), in --help order.
//
// A value is checked while CLI11 parses the command line, so a bad one is a usage error (exit code 2, one line naming
// the flag and what it takes), before anything is loaded:
//   FlagText      any text (a path, a name);
//   FlagNumber<T> a decimal number of type T in the row's range, read strictly (cli/number_flags.h);
//   FlagSwitch    a bool set by giving the flag ("--json"), or cleared by it ("--no-access-log": negated);
//   FlagChoice    text that `check` accepts: an Error naming the value and the choices otherwise; the command converts
//                 the text itself (the parse cannot fail then).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "cli/number_flags.h"
#include "core/number_text.h"

namespace nvfp4lm::cli {

struct FlagText {};

template <typename T>
struct FlagNumber {
  NumberRange<T> range = {};
};

struct FlagSwitch {
  bool negated = false;  // giving the flag sets its field to false
};

struct FlagChoice {
  std::function<void(const std::string&)> check;  // Error naming the value and the choices, for one it does not take
  std::string shown = {};  // the choices as --help shows them after the value's type ("{on,off}"); empty: none
};

using FlagValue = std::variant<FlagText, FlagNumber<int>, FlagNumber<int64_t>, FlagNumber<uint64_t>, FlagNumber<float>,
                               FlagNumber<double>, FlagSwitch, FlagChoice>;

struct FlagRow {
  std::string name;                    // "--model"; a positional argument's has no dashes ("out")
  std::vector<std::string> aliases{};  // other spellings of the same flag, listed in its --help entry
  std::string help;
  FlagValue value = FlagText{};
  std::string value_name = {};      // --help's name of the value ("ORIGIN"); empty: CLI11's (TEXT, INT, ...)
  bool one_value_per_flag = false;  // a list given by repeating the flag (--stop A --stop B), one value each
};

// A choice among `spellings` (Error "'x' is not one of a, b or c" otherwise); `shown`: listed in --help too.
FlagChoice one_of(std::vector<std::string> spellings, bool shown = false);

// The row's name and aliases as one CLI11 option name: "--out", or "--out,--output".
std::string flag_row_names(const FlagRow& row);
// A row whose value kind does not fit the field it is bound to: a programming error.
[[noreturn]] void flag_row_mismatch(const FlagRow& row, const char* field);
CLI::Validator flag_choice_validator(const FlagChoice& choice);

// The type of one value of a field: T, or U of a list (std::vector<U>) given by repeating the flag.
template <typename T>
struct FlagElementOf {
  using type = T;
};
template <typename U>
struct FlagElementOf<std::vector<U>> {
  using type = U;
};
template <typename T>
using FlagElement = typename FlagElementOf<T>::type;

// The row bound to `target` (which must outlive the parse), with the row's help or `help` where the command says it
// in its own words.
template <typename T>
CLI::Option* add_flag_row(CLI::App& app, const FlagRow& row, T& target, const std::string& help = {}) {
  const std::string names = flag_row_names(row), text = help.empty() ? row.help : help;
  CLI::Option* option = nullptr;
  if constexpr (std::is_same_v<T, bool>) {
    const auto* flag_switch = std::get_if<FlagSwitch>(&row.value);
    if (flag_switch == nullptr) flag_row_mismatch(row, "a bool");
    option = flag_switch->negated ? app.add_flag_function(
                                        names, [&target](int64_t) { target = false; }, text)
                                  : app.add_flag(names, target, text);
  } else {
    option = app.add_option(names, target, text);
    std::visit(
        [&](const auto& value) {
          using Kind = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<Kind, FlagChoice>) {
            option->check(flag_choice_validator(value));
          } else if constexpr (std::is_same_v<Kind, FlagSwitch>) {
            flag_row_mismatch(row, "a value");
          } else if constexpr (!std::is_same_v<Kind, FlagText>) {
            if constexpr (!std::is_same_v<std::decay_t<decltype(value.range.min)>, FlagElement<T>>)
              flag_row_mismatch(row, "a field of another number type");
            option->check(number_validator(value.range));
          }
        },
        row.value);
  }
  if (!row.value_name.empty()) option->type_name(row.value_name);
  if (row.one_value_per_flag) option->allow_extra_args(false);
  return option;
}

// One entry of a command's flag table: a row bound to a field, with the command's own help where given.
class FlagUse {
 public:
  template <typename T>
  FlagUse(FlagRow row, T& target, std::string help = {})
      : add_([row = std::move(row), &target, help = std::move(help)](CLI::App& app) {
          return add_flag_row(app, row, target, help);
        }) {}

  // The command cannot run without it.
  FlagUse required() && {
    required_ = true;
    return std::move(*this);
  }

  CLI::Option* add_to(CLI::App& app) const;

 private:
  std::function<CLI::Option*(CLI::App&)> add_;
  bool required_ = false;
};

using FlagTable = std::vector<FlagUse>;

// Every entry, in order (the --help order).
void add_flags(CLI::App& app, const FlagTable& table);

}  // namespace nvfp4lm::cli
