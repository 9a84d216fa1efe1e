// Prompts for reinforcement learning (`train --objective grpo`): one JSON object a line (or one JSON array of them),
// with "prompt" (text: the user message, rendered by the chat template with its generation prompt, or with
// --data-template raw the text as it is) or "messages" (the conversation before the answer, rendered with the
// generation prompt), and whatever else the reward reads ("answer" for exact match, any field for a reward command):
// each record is kept as it is. A prompt longer than max_tokens is dropped and counted (an Error under strict):
// cutting it would change the question. Errors name the file and line.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace nvfp4lm {

// samples[i]: prompt i's tokens (train_mask all 0: nothing of a prompt is trained); records[i]: its JSON object.
// summary: records = lines read, samples = prompts kept, skipped_no_trained_tokens = prompts dropped as too long.
struct PromptData {
  std::vector<Sample> samples;
  std::vector<nlohmann::json> records;
  DatasetSummary summary;
};

PromptData read_prompt_data(const std::filesystem::path& path, const Tokenizer& tokenizer,
                            const DatasetOptions& options);
PromptData parse_prompt_data(const std::string& content, const std::string& name, const Tokenizer& tokenizer,
                             const DatasetOptions& options);

}  // namespace nvfp4lm
