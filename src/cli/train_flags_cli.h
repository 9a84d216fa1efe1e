// CLI11 options made from the training flag table (train/train_flags.h). `nvfp4lm train` registers every row, in
// table order, into a TrainOptions; `bench train` registers the rows whose meaning it shares into its own
// variables, with its own help where its default or meaning differs. A row's aliases are more names of the same
// CLI11 option ("--batch,--batch-size"), so --help lists them in one entry.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "train/train_flags.h"

namespace nvfp4lm::cli {

// The row's name and aliases as one CLI11 option name: "--batch", or "--batch,--batch-size".
std::string train_flag_names(const TrainFlag& flag);

// The row `key` bound to `target` (a bool makes a switch), with the row's help or `help` where the command's
// default or meaning differs from `train`'s. The command checks the value itself.
template <typename T>
CLI::Option* add_train_flag(CLI::App& app, std::string_view key, T& target, const std::string& help = {}) {
  const TrainFlag& flag = train_flag(key);
  const std::string text = help.empty() ? std::string(flag.help) : help;
  if constexpr (std::is_same_v<T, bool>) {
    return app.add_flag(train_flag_names(flag), target, text);
  } else {
    return app.add_option(train_flag_names(flag), target, text);
  }
}

// Every row of the table bound to `options` (which must outlive this). Choice values ("--qat w4a16") are kept as
// text while CLI11 parses, and converted by finish(), so a bad value gets nvfp4lm's one-line error naming the flag.
class TrainFlagOptions {
 public:
  TrainFlagOptions(CLI::App& app, TrainOptions& options);

  // After parsing: converts the choices and applies the negated switches (--no-packing). Returns the keys of the
  // flags given on the command line (what --resume may take from them; resolve_resume_options).
  std::set<std::string> finish();

 private:
  struct Bound {
    const TrainFlag* flag;
    CLI::Option* option;
    std::unique_ptr<std::string> text;    // a choice's spelling
    std::unique_ptr<bool> negated_given;  // whether a negated switch (--no-packing) was given
  };
  TrainOptions& options_;
  std::vector<Bound> bound_;
};

}  // namespace nvfp4lm::cli
