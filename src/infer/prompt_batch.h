// `generate --prompts FILE.jsonl --out FILE.jsonl`: many prompts answered by the batch engine (batch_engine.h), each
// exactly as `generate --prompt` answers it alone.
//
// Input, one JSON object per line (blank lines skipped):
//   {"prompt": "text"}                     the user message (chat template, with --system), or with --raw the text
//   {"messages": [{"role": ..., "content": ...}, ...]}   a whole conversation (chat template; not with --raw)
//   optional: "id" (any JSON value, copied to the output), "max_tokens" (overrides --max-tokens for the line; 1 to
//   kMaxGenerateTokens, as --max-tokens)
// Output, one line per input line, in input order:
//   {"index": i, "id": ..., "text": "...", "tokens": [...], "prompt_tokens": n, "finish_reason": "stop"|"length",
//    "stop_reason": "eos"|"stop string"|"max tokens"|"context full"}
// Sampling: the flags apply to every line; line i draws with seed --seed + i (so it equals `generate --prompt ...
// --seed <seed + i>`).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/files.h"
#include "infer/batch_engine.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

// How `generate` turns a prompt into tokens: as-is (raw), or as the user message of a chat after an optional system
// message, rendered with the model's chat template.
struct PromptFormat {
  bool raw = false;
  std::string system;
  std::optional<ChatTemplate> chat_template;  // required unless raw
  std::optional<bool> enable_thinking;        // passed to the template when set (--no-think: false)
};
std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, std::string_view text, const PromptFormat& format);

inline constexpr int64_t kMaxGenerateTokens = int64_t{1} << 24;  // the most new tokens a request may ask for

struct PromptLine {
  nlohmann::json id;  // null when the line has none
  std::vector<int32_t> prompt;
  std::optional<int64_t> max_tokens;
};

// Reads FILE.jsonl (a regular file of at most 1 GiB); Error naming the file, the line and what is wrong.
std::vector<PromptLine> read_prompt_lines(const fs::path& path, const Tokenizer& tokenizer, const PromptFormat& format);

struct BatchAnswer {
  std::vector<int32_t> tokens;  // every chosen token, the end-of-sequence token included
  std::string text;
  StopReason stop_reason = StopReason::MaxTokens;
  std::string stop_detail;
  int64_t prompt_tokens = 0;
  std::vector<float> entropies;  // SequenceSpec::entropy: the entropy of each chosen token's distribution
};

// Runs every spec through `engine`, at most engine.slots() at a time, a waiting one starting as soon as a slot frees;
// answers in the specs' order. `on_done(index, answer)` (optional) is called as each one finishes. Between decode
// steps at most `admit_per_step` waiting specs start (1: as the server admits them, so that running answers keep
// their pace; a batch job that only wants them all done, GRPO's rollouts, fills every free slot). Answers do not
// depend on it (batch_engine.h).
std::vector<BatchAnswer> run_batch(BatchEngine& engine, std::vector<SequenceSpec> specs,
                                   const std::function<void(size_t, const BatchAnswer&)>& on_done = {},
                                   int64_t admit_per_step = 1);

// The output line (without the newline) of answer `index`.
std::string answer_line(size_t index, const PromptLine& line, const BatchAnswer& answer);

}  // namespace nvfp4lm
