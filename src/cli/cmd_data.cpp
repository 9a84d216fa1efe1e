// `nvfp4lm data whoami --name NAME --out FILE`: writes the identity data set of data/whoami_data.h (the F#
// predecessor's WhoAmI data generator, for any name) as chat JSONL that `nvfp4lm train --data` reads.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/flag_rows.h"
#include "core/error.h"
#include "core/files.h"
#include "data/whoami_data.h"

namespace nvfp4lm::cli {
namespace {

struct WhoamiCliOptions {
  WhoamiOptions data;
  std::string out;
  bool overwrite = false;
};

int run_whoami(const WhoamiCliOptions& cli) {
  check_whoami_options(cli.data);
  guard_output(cli.out, "--out", {}, cli.overwrite, OutputKind::File);
  const WhoamiDataset data = make_whoami_dataset(cli.data);
  write_file_atomic(cli.out, data.jsonl, cli.overwrite);
  const std::string text = fmt::format(
      "wrote {}: {} conversations, {} asking who the model is ({} distinct phrasings, English and Chinese, {} after "
      "another question) answered \"{}\" / \"{}\", and {} control questions with their usual answers\n",
      cli.out, cli.data.conversations, data.identity_conversations, data.distinct_identity_questions, data.multi_turn,
      whoami_answer_english(cli.data), whoami_answer_chinese(cli.data), data.control_conversations);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

CommandRegistration data_registration(
    "data", "Write training data sets (whoami: teach a model its name)",
    [](CLI::App& app) -> CommandRun {
      app.require_subcommand(1);
      CLI::App* whoami = app.add_subcommand(
          "whoami",
          "A balanced identity data set: many phrasings of 'who are you?' in English and Chinese answered "
          "with NAME, mixed with control questions keeping their usual answers (JSONL chat data)");
      auto options = std::make_shared<WhoamiCliOptions>();
      add_flags(
          *whoami,
          {
              FlagUse({.name = "--name", .help = "the name the model gives itself"}, options->data.name).required(),
              FlagUse({.name = "--creator", .help = "who it says trained it (default nvfp4lm)"}, options->data.creator),
              FlagUse({.name = "--answer",
                       .help = "the English answer (default: \"I am NAME, a 4-bit assistant trained by CREATOR.\")"},
                      options->data.answer_english),
              FlagUse({.name = "--answer-zh",
                       .help = "the Chinese answer (default: \"我是NAME，一个由CREATOR训练的4位助手。\")"},
                      options->data.answer_chinese),
              FlagUse({.name = "--out", .aliases = {"--output"}, .help = "the JSONL file to write"}, options->out)
                  .required(),
              FlagUse({.name = "--count",
                       .help = "conversations (default 400)",
                       .value = FlagNumber<int64_t>{{2, kMaxWhoamiConversations}}},
                      options->data.conversations),
              FlagUse({.name = "--identity-share",
                       .help = "share of identity conversations, the rest are control questions (default 0.5)",
                       .value = FlagNumber<double>{{0.0, 1.0}}},
                      options->data.identity_share),
              FlagUse(rows::seed(), options->data.seed, "order of phrasings and questions (default 0)"),
              FlagUse(rows::overwrite(), options->overwrite, "replace FILE if it exists"),
          });
      return [options] { return run_whoami(*options); };
    },
    70);

}  // namespace
}  // namespace nvfp4lm::cli
