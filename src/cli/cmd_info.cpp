// `nvfp4lm info MODEL`: format, architecture, config summary, every weight with dtype, shape, bytes and
// whether it is NVFP4, parameter counts and byte totals (io/model_info.h). --json prints the same as one JSON
// object on stdout; --checksums adds per-tensor sums of every data file (reads the whole model). A GGUF file (named
// .gguf, or any file that starts with the GGUF magic) is described from its own header (io/gguf_info.h).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/flag_rows.h"
#include "core/error.h"
#include "io/gguf_info.h"
#include "io/model_files.h"
#include "io/model_info.h"

namespace nvfp4lm::cli {
namespace {

struct InfoOptions {
  std::string model;
  std::string config;
  std::string tokenizer;
  bool json = false;
  bool checksums = false;
};

int run_info(const InfoOptions& options) {
  if (fs::path(options.model).extension() == ".gguf" || starts_with_gguf_magic(options.model)) {
    NVFP4LM_CHECK(!options.checksums && options.config.empty() && options.tokenizer.empty(),
                  "--checksums, --config and --tokenizer do not apply to a GGUF file (it holds its own metadata)");
    const auto info = gguf_info_json(GgufFile::open(options.model));
    const std::string printed = options.json
                                    ? info.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n"
                                    : gguf_info_text(info);
    std::fwrite(printed.data(), 1, printed.size(), stdout);
    return 0;
  }
  OpenModelOptions open_options;
  if (!options.config.empty()) open_options.config_path = options.config;
  if (!options.tokenizer.empty()) open_options.tokenizer_dir = options.tokenizer;
  const auto model = open_model(options.model, open_options);
  const auto info = model_info_json(*model, {options.checksums});
  const std::string printed = options.json ? info.dump(2) + "\n" : model_info_text(info);
  std::fwrite(printed.data(), 1, printed.size(), stdout);
  return 0;
}

CommandRegistration info_registration(
    "info", "Show a model's format, config, tensors, parameter counts and sizes",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<InfoOptions>();
      add_flags(
          app, {
                   FlagUse({.name = "model", .help = "HF directory, ModelOpt NVFP4 directory, .dat file or .gguf file"},
                           options->model)
                       .required(),
                   FlagUse(rows::json(), options->json),
                   FlagUse({.name = "--checksums",
                            .help = "add the sum of every tensor of every data file (reads it all)",
                            .value = FlagSwitch{}},
                           options->checksums),
                   FlagUse(rows::config(), options->config),
                   FlagUse(rows::tokenizer(), options->tokenizer),
               });
      return [options] { return run_info(*options); };
    },
    20);

}  // namespace
}  // namespace nvfp4lm::cli
