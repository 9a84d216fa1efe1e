// nvfp4lm command-line entry point: parses the subcommand, runs it, and turns every nvfp4lm::Error into a
// one-line message on stderr and exit code 1 (2 for usage errors). No logic lives here.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>

#include "cli/command.h"
#include "core/error.h"
#include "core/logging.h"
#include "train/dist/mpi_communicator.h"

namespace nvfp4lm::cli {
std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> registry;
  return registry;
}
}  // namespace nvfp4lm::cli

int main(int argc, char** argv) {
  using namespace nvfp4lm;
  CLI::App app{"nvfp4lm: NVFP4 quantization-aware fine-tuning, inference and conversion for Qwen3 models", "nvfp4lm"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("nvfp4lm ") + NVFP4LM_VERSION);
  std::string log_level;
  app.add_option("--log-level", log_level, "debug, info, warn, error or off (default: $NVFP4LM_LOG or info)");

  auto& registry = cli::command_registry();
  std::stable_sort(registry.begin(), registry.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  std::vector<std::pair<CLI::App*, cli::CommandRun>> runs;
  try {
    for (auto& spec : registry) {
      CLI::App* sub = app.add_subcommand(spec.name, spec.help);
      runs.emplace_back(sub, spec.setup(*sub));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvfp4lm: internal error while setting up commands: %s\n", e.what());
    return 1;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every parse or validation error is a usage error: one line like every other
    // error, and exit code 2 whatever CLI11's own code for its kind (105 for a failed check, 106 for a missing
    // option, ...).
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "nvfp4lm: error: %s (see --help)\n", e.what());
    return 2;
  }

  // One line on stderr and the exit code; a rank of a data-parallel run (train/dist/) names itself and ends the whole
  // job, so that the other ranks do not wait for it in a collective.
  auto fail = [](int code, const char* what) {
    const std::string rank = mpi_rank_label();
    std::fprintf(stderr, "nvfp4lm: error%s: %s\n", rank.empty() ? "" : (" (" + rank + ")").c_str(), what);
    std::fflush(stderr);
    abort_mpi_job(code);
    return code;
  };
  try {
    if (!log_level.empty()) log::set_level(log::parse_level(log_level));
    for (auto& [sub, run] : runs) {
      if (sub->parsed()) return run();
    }
    return 2;
  } catch (const UsageError& e) {
    return fail(2, e.what());
  } catch (const Error& e) {
    return fail(1, e.what());
  } catch (const std::bad_alloc&) {
    return fail(1, "out of host memory");
  } catch (const std::exception& e) {
    return fail(1, e.what());
  }
}
