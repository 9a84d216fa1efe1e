// CLI rows made from the training flag table (train/train_flags.h): `nvfp4lm train` registers every row, in table
// order, into a TrainOptions; other commands take the rows whose meaning they share (`bench train` its training
// settings, every device-using command --device and --max-memory, ...) into their own fields, with their own help
// where their default or meaning differs (cli/flag_rows.h). A row's aliases are more names of the same CLI11 option
// ("--batch,--batch-size"), so --help lists them in one entry.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cli/flag_row.h"
#include "train/train_flags.h"

namespace nvfp4lm::cli {

// The CLI row of a training flag: its names and help, a number read in its range (a "0 = unset" number only from 1
// up), a choice checked against its spellings while parsing.
FlagRow train_flag_row(const TrainFlag& flag);
// The row with this trainer_state.json key (train_flag).
FlagRow train_flag_row(std::string_view key);

// Every row of the table bound to `options` (which must outlive this). Choice values ("--qat w4a16") are kept as
// text while CLI11 parses and checks them, and converted by finish().
class TrainFlagOptions {
 public:
  TrainFlagOptions(CLI::App& app, TrainOptions& options);

  // After parsing: converts the choices. Returns the keys of the flags given on the command line (what --resume may
  // take from them; resolve_resume_options).
  std::set<std::string> finish();

 private:
  struct Bound {
    const TrainFlag* flag;
    CLI::Option* option;
    std::unique_ptr<std::string> text;  // a choice's spelling
  };
  TrainOptions& options_;
  std::vector<Bound> bound_;
};

}  // namespace nvfp4lm::cli
