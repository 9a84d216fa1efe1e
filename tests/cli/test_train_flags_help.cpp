// `nvfp4lm train --help` is made from the training flag table (train/train_flags.h): one entry per row, in table
// order, with the row's names and help text; `bench train --help` shows the rows it shares with `train`.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "common/test_util.h"
#include "train/train_flags.h"

namespace nvfp4lm::test::test_train_flags_help {
namespace {

// The line of `help` that lists the option named `name` first ("  --batch INT ..." or "  --batch,--batch-size INT
// ..."), and its index. When the names fill the name column, CLI11 puts the help text on the next line: that line
// is appended.
std::pair<size_t, std::string> help_line(const std::string& help, std::string_view name) {
  std::istringstream lines(help);
  std::string line;
  for (size_t index = 0; std::getline(lines, line); ++index) {
    const size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos || line.compare(start, name.size(), name) != 0) continue;
    const size_t end = start + name.size();
    if (end != line.size() && line[end] != ' ' && line[end] != ',') continue;
    // Names only: the names and at most a type word (INT, TEXT, ...). A name that fills the column exactly is
    // followed by its help after a single space, so a missing double space does not say it.
    std::istringstream words(line.substr(start));
    std::string names, type, more;
    words >> names >> type >> more;
    const bool type_word = !type.empty() && type.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") == std::string::npos;
    const bool names_only = type.empty() || (type_word && more.empty());
    std::string next;
    if (names_only && std::getline(lines, next)) {
      // append(), not `" " + next.substr(...)`: GCC 12 reports a false -Wrestrict on the latter under -O2.
      const size_t text = next.find_first_not_of(' ');
      if (text != std::string::npos) line.append(" ").append(next, text, std::string::npos);
    }
    return {index, line};
  }
  return {std::string::npos, ""};
}

bool ends_with(const std::string& text, std::string_view end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

TEST(TrainFlagsHelp, TrainHelpListsEveryRowInTableOrderWithItsHelp) {
  const CliResult result = run_cli("train --help");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  size_t previous = 0;
  for (const TrainFlag& flag : train_flags()) {
    const auto [index, line] = help_line(result.out, flag.name);
    ASSERT_NE(index, std::string::npos) << flag.name << " missing from:\n" << result.out;
    EXPECT_GT(index, previous) << flag.name << " out of table order";
    EXPECT_TRUE(ends_with(line, flag.help)) << line;
    for (std::string_view alias : flag.aliases)
      EXPECT_NE(line.find(alias), std::string::npos) << alias << " not listed with " << line;
    previous = index;
  }
}

TEST(TrainFlagsHelp, BenchTrainSharesTheRowsOfTrain) {
  const CliResult result = run_cli("bench train --help");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* key : {"qat", "optimizer", "master", "packed_weights", "recompute"}) {
    const TrainFlag& flag = train_flag(key);
    const auto [index, line] = help_line(result.out, flag.name);
    ASSERT_NE(index, std::string::npos) << flag.name << " missing from:\n" << result.out;
    EXPECT_TRUE(ends_with(line, flag.help)) << line;
  }
  // Rows whose default or meaning differs in bench (a constant --lr, --seq-len required, ...): the names only.
  for (const char* key : {"seq_len", "batch", "fused_update", "lr", "seed"})
    EXPECT_NE(help_line(result.out, train_flag(key).name).first, std::string::npos) << key;
}

}  // namespace
}  // namespace nvfp4lm::test::test_train_flags_help
