// Subcommand registry. Each cli/cmd_*.cpp registers itself with a static CommandRegistration, so adding a
// command never touches main.cpp. A command's setup adds its options to the CLI11 subcommand and returns
// the function to run after parsing; that function returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace nvfp4lm::cli {

using CommandRun = std::function<int()>;
using CommandSetup = std::function<CommandRun(CLI::App& subcommand)>;

struct CommandSpec {
  std::string name;
  std::string help;
  CommandSetup setup;
  int order = 100;  // position in --help
};

std::vector<CommandSpec>& command_registry();

struct CommandRegistration {
  CommandRegistration(std::string name, std::string help, CommandSetup setup, int order = 100) {
    command_registry().push_back({std::move(name), std::move(help), std::move(setup), order});
  }
};

}  // namespace nvfp4lm::cli
