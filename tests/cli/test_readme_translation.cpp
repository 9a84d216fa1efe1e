// README.zh-TW.md, the Traditional Chinese README the F# predecessor's users read (it documented everything in English
// and Traditional Chinese), is kept in step with README.md: the same commands (`nvfp4lm <command>`), the same flags
// (every `--flag` token), the same code blocks byte for byte, and the migration table's commands. The comparison is
// tested first on planted texts, so a check that cannot fail does not pass.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace nvfp4lm::test::test_readme_translation {
namespace {

// Every "--flag" token: "--" after a character that cannot be part of a word or flag, then [a-z0-9-]+.
std::set<std::string> flags_of(const std::string& text) {
  std::set<std::string> flags;
  for (size_t at = text.find("--"); at != std::string::npos; at = text.find("--", at + 2)) {
    if (at > 0) {
      const char before = text[at - 1];
      if (std::isalnum(static_cast<unsigned char>(before)) || before == '-' || before == '_') continue;
    }
    size_t end = at + 2;
    while (end < text.size() && (std::islower(static_cast<unsigned char>(text[end])) ||
                                 std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '-'))
      ++end;
    if (end > at + 2 && text[at + 2] != '-') flags.insert(text.substr(at, end - at));
  }
  return flags;
}

std::set<std::string> matches(const std::string& text, const std::regex& pattern) {
  std::set<std::string> found;
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it) found.insert(it->str());
  return found;
}

// The text inside backticks (inline spans and fenced blocks): where commands are named. Prose may say "nvfp4lm
// replaces ..." in either language.
std::string code_of(const std::string& text) {
  std::string code;
  bool inside = false;
  for (const char c : text) {
    if (c == '`') {
      inside = !inside;
      code += '\n';
    } else if (inside) {
      code += c;
    }
  }
  return code;
}

std::vector<std::string> code_blocks(const std::string& text) {
  std::vector<std::string> blocks;
  for (size_t start = text.find("\n```"); start != std::string::npos;) {
    const size_t end = text.find("\n```", start + 4);
    if (end == std::string::npos) break;
    blocks.push_back(text.substr(start, end - start));
    start = text.find("\n```", end + 4);
  }
  return blocks;
}

// The migration table's two command columns, row by row.
std::vector<std::string> migration_commands(const std::string& text) {
  const size_t begin = text.find("<!-- migration-table: begin -->"), end = text.find("<!-- migration-table: end -->");
  if (begin == std::string::npos || end == std::string::npos) return {"(no migration table)"};
  const std::string table = text.substr(begin, end - begin);
  const std::regex row(R"(\| `[^`]*` \| `[^`]*` \|)");
  std::vector<std::string> rows;
  for (std::sregex_iterator it(table.begin(), table.end(), row), last; it != last; ++it) rows.push_back(it->str());
  return rows;
}

// What one README has and the other lacks, one line each ("" when they agree).
std::string readme_differences(const std::string& english, const std::string& chinese) {
  std::string report;
  auto compare_sets = [&](const std::set<std::string>& a, const std::set<std::string>& b, const std::string& what) {
    for (const std::string& item : a)
      if (!b.count(item)) report += what + " " + item + " only in README.md\n";
    for (const std::string& item : b)
      if (!a.count(item)) report += what + " " + item + " only in README.zh-TW.md\n";
  };
  compare_sets(flags_of(english), flags_of(chinese), "flag");
  const std::regex command(R"(nvfp4lm [a-z][a-z-]*)");
  compare_sets(matches(code_of(english), command), matches(code_of(chinese), command), "command");
  const std::vector<std::string> blocks_a = code_blocks(english), blocks_b = code_blocks(chinese);
  if (blocks_a != blocks_b) {
    report +=
        "code blocks differ (" + std::to_string(blocks_a.size()) + " and " + std::to_string(blocks_b.size()) + ")\n";
    for (size_t i = 0; i < std::min(blocks_a.size(), blocks_b.size()); ++i)
      if (blocks_a[i] != blocks_b[i]) {
        report += "first different block: " + blocks_a[i].substr(0, 80) + "\n";
        break;
      }
  }
  if (migration_commands(english) != migration_commands(chinese)) report += "migration table commands differ\n";
  return report;
}

TEST(ReadmeTranslation, TheComparisonFindsWhatOneSideLacks) {
  const std::string english =
      "Run `nvfp4lm train --lr 1e-5` or `nvfp4lm export --format dat`.\n```\nnvfp4lm demo --steps 3\n```\n"
      "<!-- migration-table: begin -->\n| a | `old --x` | `nvfp4lm train --x` |\n<!-- migration-table: end -->\n";
  EXPECT_EQ(readme_differences(english, english), "");
  std::string chinese = english;
  chinese.replace(chinese.find("Run"), 3, "執行");  // prose may differ
  EXPECT_EQ(readme_differences(english, chinese), "");
  EXPECT_NE(readme_differences(english, chinese + "再加 `--gpu-limit-gb 108`。\n")
                .find("flag --gpu-limit-gb only in "
                      "README.zh-TW.md"),
            std::string::npos);
  EXPECT_NE(readme_differences(english + "Also `--overwrite`.\n", chinese).find("flag --overwrite only in README.md"),
            std::string::npos);
  EXPECT_NE(readme_differences(english + "`nvfp4lm serve`\n", chinese).find("command nvfp4lm serve only in README.md"),
            std::string::npos);
  EXPECT_EQ(readme_differences(english + "nvfp4lm replaces it.\n", chinese), "");  // prose, not a command
  std::string other_block = chinese;
  other_block.replace(other_block.find("--steps 3"), 9, "--steps 4");
  EXPECT_NE(readme_differences(english, other_block).find("code blocks differ"), std::string::npos);
  std::string other_row = chinese;
  other_row.replace(other_row.find("`nvfp4lm train --x`"), 19, "`nvfp4lm train --y`");
  EXPECT_NE(readme_differences(english, other_row).find("migration table commands differ"), std::string::npos);
  // Not flags: an em dash pair inside a word, a table rule, a decrement.
  EXPECT_EQ(flags_of("a--b |---| x-- `--ok`"), std::set<std::string>{"--ok"});
}

TEST(ReadmeTranslation, TheTraditionalChineseReadmeHasTheEnglishOnesCommandsAndFlags) {
  const std::string english = read_file(source_path("README.md"));
  const std::string chinese = read_file(source_path("README.zh-TW.md"));
  EXPECT_EQ(readme_differences(english, chinese), "")
      << "README.zh-TW.md must follow README.md: the same commands, flags, code blocks and migration table";
  EXPECT_NE(english.find("README.zh-TW.md"), std::string::npos) << "README.md links its translation";
}

}  // namespace
}  // namespace nvfp4lm::test::test_readme_translation
