// See train_flags_cli.h.
#include "cli/train_flags_cli.h"

#include <type_traits>

#include "train/train_options.h"

namespace nvfp4lm::cli {

FlagRow train_flag_row(const TrainFlag& flag) {
  FlagRow row;
  row.name = flag.name;
  for (std::string_view alias : flag.aliases) row.aliases.emplace_back(alias);
  row.help = flag.help;
  row.value = std::visit(
      [](const auto& value) -> FlagValue {
        using Kind = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<Kind, TrainFlagChoice>) {
          return FlagChoice{[parse = value.parse](const std::string& text) {
            TrainOptions scratch;
            parse(scratch, text);
          }};
        } else if constexpr (std::is_same_v<Kind, TrainFlagSwitch>) {
          return FlagSwitch{value.negated};
        } else if constexpr (std::is_same_v<Kind, TrainFlagText>) {
          return FlagText{};
        } else {  // numbers: the default 0 of a "0 = unset" number cannot be given
          auto range = value.range;
          if (value.zero_is_unset) range.min = 1;
          return FlagNumber<std::decay_t<decltype(range.min)>>{range};
        }
      },
      flag.value);
  return row;
}

FlagRow train_flag_row(std::string_view key) { return train_flag_row(train_flag(key)); }

TrainFlagOptions::TrainFlagOptions(CLI::App& app, TrainOptions& options) : options_(options) {
  for (const TrainFlag& flag : train_flags()) {
    const FlagRow row = train_flag_row(flag);
    Bound bound{&flag, nullptr, nullptr};
    bound.option = std::visit(
        [&](const auto& value) {
          using Kind = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<Kind, TrainFlagChoice>) {
            bound.text = std::make_unique<std::string>(value.text(options));  // the default's spelling
            CLI::Option* option = add_flag_row(app, row, *bound.text);
            // Given alone ("--resume"), the option takes its bare spelling; CLI11 reads a next word that is not a
            // flag as its value ("--resume true").
            if (!value.bare.empty()) option->expected(0, 1)->default_str(std::string(value.bare));
            return option;
          } else {
            return add_flag_row(app, row, options.*value.member);
          }
        },
        flag.value);
    bound_.push_back(std::move(bound));
  }
}

std::set<std::string> TrainFlagOptions::finish() {
  std::set<std::string> given;
  for (const Bound& bound : bound_) {
    const TrainFlag& flag = *bound.flag;
    if (bound.text) std::get<TrainFlagChoice>(flag.value).parse(options_, *bound.text);  // checked while parsing
    if (flag.saved() && bound.option->count() > 0) given.insert(std::string(flag.key));
  }
  return given;
}

}  // namespace nvfp4lm::cli
