// See train_flags_cli.h.
#include "cli/train_flags_cli.h"

#include "cli/number_flags.h"
#include "train/train_options.h"

namespace nvfp4lm::cli {

std::string train_flag_names(const TrainFlag& flag) {
  std::string names(flag.name);
  for (std::string_view alias : flag.aliases) {
    names += ',';
    names += alias;
  }
  return names;
}

TrainFlagOptions::TrainFlagOptions(CLI::App& app, TrainOptions& options) : options_(options) {
  for (const TrainFlag& flag : train_flags()) {
    const std::string names = train_flag_names(flag), help(flag.help);
    Bound bound{&flag, nullptr, nullptr, nullptr};
    bound.option = std::visit(
        [&](const auto& value) {
          using Kind = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<Kind, TrainFlagChoice>) {
            bound.text = std::make_unique<std::string>(value.text(options));  // the default's spelling
            CLI::Option* option = app.add_option(names, *bound.text, help);
            // Given alone ("--resume"), the option takes its bare spelling; CLI11 reads a next word that is not a
            // flag as its value ("--resume true").
            if (!value.bare.empty()) option->expected(0, 1)->default_str(std::string(value.bare));
            return option;
          } else if constexpr (std::is_same_v<Kind, TrainFlagSwitch>) {
            if (!value.negated) return app.add_flag(names, options.*value.member, help);
            bound.negated_given = std::make_unique<bool>(false);
            return app.add_flag(names, *bound.negated_given, help);
          } else if constexpr (std::is_same_v<Kind, TrainFlagText>) {
            return app.add_option(names, options.*value.member, help);
          } else {  // numbers: strictly, in the row's range (a usage error otherwise)
            auto range = value.range;
            if (value.zero_is_unset) range.min = 1;
            return add_number_option(app, names, options.*value.member, help, range);
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
    if (bound.text) {
      const auto& choice = std::get<TrainFlagChoice>(flag.value);
      parse_flag_value(flag.name, *bound.text, [&](const std::string& text) { choice.parse(options_, text); });
    }
    if (bound.negated_given) options_.*std::get<TrainFlagSwitch>(flag.value).member = !*bound.negated_given;
    if (flag.saved() && bound.option->count() > 0) given.insert(std::string(flag.key));
  }
  return given;
}

}  // namespace nvfp4lm::cli
