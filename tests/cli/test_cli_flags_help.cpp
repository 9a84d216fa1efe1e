// Every command's --help lists the same entries (options with their aliases, positionals, [subcommands]) in the same
// order as before the commands' flags became rows of one type (cli/flag_row.h): tests/fixtures/cli/help_entries.txt
// was written from the binary of main c82551d. Changing a flag is a deliberate edit of that file too.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "common/test_util.h"

namespace nvfp4lm::test::test_cli_flags_help {
namespace {

// The entries of a --help text, space-separated: the first word of each line indented by two spaces under
// "Options:" and "Positionals:" ("--out,--output"), and "[name]" under "Subcommands:".
std::string help_entries(const std::string& help) {
  std::istringstream lines(help);
  std::string line, section, entries;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] != ' ' && line.back() == ':') {
      section = line;
      continue;
    }
    if (line.size() < 3 || line.compare(0, 2, "  ") != 0 || line[2] == ' ') continue;
    const std::string name = line.substr(2, line.find(' ', 2) - 2);
    if (section == "Subcommands:") {
      entries += " [" + name + "]";
    } else if (section == "Options:" || section == "Positionals:") {
      entries += " " + name;
    }
  }
  return entries;
}

// The fixture's lines: command ("nvfp4lm" for the program itself, "bench infer") -> its entries.
std::map<std::string, std::string> expected_entries() {
  std::map<std::string, std::string> expected;
  std::istringstream lines(read_file(fixture_path("cli/help_entries.txt")));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    expected[line.substr(0, colon)] = line.substr(colon + 1);
  }
  return expected;
}

TEST(CliFlagsHelp, EveryCommandListsTheEntriesItListedBefore) {
  const std::map<std::string, std::string> expected = expected_entries();
  ASSERT_GT(expected.size(), 20u);
  for (const auto& [command, entries] : expected) {
    const CliResult result = run_cli(command == "nvfp4lm" ? "--help" : command + " --help");
    ASSERT_EQ(result.exit_code, 0) << command << ": " << result.err;
    EXPECT_EQ(help_entries(result.out), entries) << "nvfp4lm " << command << " --help:\n" << result.out;
  }
}

TEST(CliFlagsHelp, TheFixtureCoversEverySubcommand) {
  const std::map<std::string, std::string> expected = expected_entries();
  for (const auto& [command, entries] : expected) {
    for (size_t open = entries.find('['); open != std::string::npos; open = entries.find('[', open + 1)) {
      const std::string sub = entries.substr(open + 1, entries.find(']', open) - open - 1);
      const std::string full = command == "nvfp4lm" ? sub : command + " " + sub;
      EXPECT_TRUE(expected.count(full)) << "no line for `nvfp4lm " << full << " --help` in the fixture";
    }
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_cli_flags_help
