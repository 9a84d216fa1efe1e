// See flag_row.h.
#include "cli/flag_row.h"

#include <fmt/format.h>

#include "core/error.h"

namespace nvfp4lm::cli {

FlagChoice one_of(std::vector<std::string> spellings, bool shown) {
  std::string listed, braced;
  for (size_t i = 0; i < spellings.size(); ++i) {
    listed += i == 0 ? "" : i + 1 == spellings.size() ? " or " : ", ";
    listed += spellings[i];
    braced += (i == 0 ? "{" : ",") + spellings[i];
  }
  FlagChoice choice;
  choice.check = [spellings, listed](const std::string& text) {
    for (const std::string& spelling : spellings)
      if (text == spelling) return;
    NVFP4LM_FAIL("'{}' is not one of {}", text, listed);
  };
  if (shown) choice.shown = braced + "}";
  return choice;
}

std::string flag_row_names(const FlagRow& row) {
  std::string names = row.name;
  for (const std::string& alias : row.aliases) names += "," + alias;
  return names;
}

void flag_row_mismatch(const FlagRow& row, const char* field) {
  internal_error("add_flag_row", __FILE__, __LINE__,
                 fmt::format("flag {}: its row's value kind cannot be stored in {}", row.name, field));
}

CLI::Validator flag_choice_validator(const FlagChoice& choice) {
  return CLI::Validator(
      [check = choice.check](const std::string& text) {
        try {
          check(text);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      },
      choice.shown, "choice");
}

CLI::Option* FlagUse::add_to(CLI::App& app) const {
  CLI::Option* option = add_(app);
  if (required_) option->required();
  return option;
}

void add_flags(CLI::App& app, const FlagTable& table) {
  for (const FlagUse& use : table) use.add_to(app);
}

}  // namespace nvfp4lm::cli
