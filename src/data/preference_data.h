// Preference data for DPO / IPO (`train --objective dpo`): pairs of completions of one prompt, the preferred one
// first, in the formats of TRL's preference datasets (JSON lines, or one JSON array of such objects):
//   standard          {"prompt": "...", "chosen": "...", "rejected": "..."}
//   conversational    {"prompt": [messages], "chosen": [one assistant message], "rejected": [one assistant message]}
//                     ("messages" may stand for "prompt"; a string for a completion is the assistant's content)
//   implicit prompt   {"chosen": [messages], "rejected": [messages]}: the prompt is the longest common prefix of the
//                     two conversations (TRL's extract_prompt), and each must go on with one assistant message
// "tools" travel to the chat template as in training data; other keys are ignored.
//
// Each pair becomes two samples, chosen then rejected, rendered like the training data's (data/dataset.h): a
// conversational pair by the chat template, trained (scored) on the final assistant message only — its content
// and the end-of-turn token, as SFT trains it; TRL's tokenization also scores the "\n" after <|im_end|>, which
// both completions share —; a standard pair by --data-template (chat: [user: prompt, assistant: completion];
// raw: prompt tokens, completion tokens and EOS, TRL's own handling of standard data, which adds the EOS as text).
// A completion longer than max_tokens is cut (the prompt kept, TRL's keep_start), counted, or an Error under
// strict; a pair left with a completion without a scored token is dropped and counted (an Error under strict).
// Errors name the file and line: a missing or empty completion, a completion that is not one assistant message,
// chosen and rejected that share no prompt, and everything read_dataset refuses.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace nvfp4lm {

// samples[2p] and samples[2p + 1]: pair p's chosen and rejected completion (each with its prompt). summary:
// preference_pairs set, records = pairs read, samples = 2 x pairs kept, truncated = completions cut,
// skipped_no_trained_tokens = pairs dropped.
struct PreferenceData {
  std::vector<Sample> samples;
  DatasetSummary summary;
  int64_t pairs() const { return static_cast<int64_t>(samples.size() / 2); }
};

PreferenceData read_preference_data(const std::filesystem::path& path, const Tokenizer& tokenizer,
                                    const DatasetOptions& options);
PreferenceData parse_preference_data(const std::string& content, const std::string& name, const Tokenizer& tokenizer,
                                     const DatasetOptions& options);

}  // namespace nvfp4lm
