// Reading a training data file into tokenized samples (DESIGN.md §5), with a summary for the user.
//
// Formats (chosen by extension, or by DatasetOptions::format / --data-format; never guessed from content):
//   .jsonl / .json  JSON lines, one object per line, either
//                     {"messages": [{"role": "system|user|assistant|tool", "content": "...", ...}, ...],
//                      "tools": [...]}
//                   (messages as tokenizer/chat_message.h reads them: reasoning_content, tool_calls,
//                   tool_call_id too; tools optional) or
//                     {"prompt": "...", "completion": "..."}
//                   (each line may use either schema; other keys are ignored). A .json file whose first
//                   non-blank character is '[' is read as one JSON array of such objects, and its
//                   messages name "entry N" instead of "line N".
//   .tsv            prompt<TAB>target, one pair a line; lines starting with '#' and blank lines are
//                   skipped; exactly one tab a line. Fields understand the escapes \n \t \r \\ and a
//                   leading \# (for a prompt that starts with '#'); any other backslash is kept as is.
//   .txt            plain text; documents are the whole file (TextSplit::WholeFile) or runs of non-blank
//                   lines separated by blank lines (TextSplit::BlankLines); each document is followed by
//                   <|endoftext|>.
// Files are UTF-8 (a leading byte-order mark is dropped, CRLF line ends become LF).
//
// Rendering and loss masks (train_mask, see sample.h):
//   messages        rendered by the chat template (the tokenizer's own unless DatasetOptions::chat_template says
//                   otherwise) via encode_chat (tokenizer/chat.h): loss on what the model generates in each
//                   assistant turn (reasoning, answer, tool calls, end-of-turn token; not the reasoning with
//                   train_reasoning = false). A conversation may become several samples (chat.h says when).
//                   A record the template cannot render is an Error naming the line.
//   prompt/target   PairTemplate::Chat (default): the conversation [user: prompt, assistant: target],
//                   masked as above. PairTemplate::Raw (--data-template raw): prompt tokens, then target
//                   tokens, then the EOS token (tokenizer_config eos_token, else <|endoftext|>); prompt and
//                   target are tokenized separately; loss on target + EOS.
//   text            loss on every token.
//   train_on_everything sets every mask to 1 (padding is still never trained: batch.h).
// Special tokens written in the data (e.g. "<|endoftext|>") become control tokens, as in HF.
//
// Lengths (max_tokens, normally the training seq_len; 0 = no limit): a longer chat or pair sample is cut to its
// first max_tokens tokens and counted (an Error naming the line under `strict`); a longer text document is cut
// into consecutive samples of max_tokens tokens that overlap by one token, so every token except the
// document's first is predicted exactly once.
//
// Samples with nothing to train on are dropped and counted, or are an Error under `strict`: a conversation
// without an assistant message (kept when train_on_everything), and a sample left with no trained target
// (e.g. a prompt longer than max_tokens). Everything else that is wrong is always an Error that names the file,
// the line and the problem: bad JSON, a line that is not an object, missing or non-array "messages",
// a message without "role" / "content", non-string content, an unknown role, missing or non-string prompt or
// completion, an empty (or whitespace-only) target, invalid UTF-8 (with the byte offset), a TSV line without
// exactly one tab, a file with no usable sample.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/sample.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

enum class DataFormat { Auto, Jsonl, Tsv, Text };
enum class PairTemplate { Chat, Raw };
enum class TextSplit { WholeFile, BlankLines };

struct DatasetOptions {
  DataFormat format = DataFormat::Auto;  // Auto: by extension (detect_data_format)
  PairTemplate pair_template = PairTemplate::Chat;
  TextSplit text_split = TextSplit::WholeFile;
  std::optional<ChatTemplate> chat_template;  // nullopt: ChatTemplate::resolve(tokenizer) (the tokenizer's own)
  bool train_all_assistant_turns = true;      // false: only the last assistant message of a conversation
  bool train_reasoning = true;                // false: no loss on reasoning (--no-train-reasoning, chat.h)
  bool train_on_everything = false;
  bool strict = false;
  int64_t max_tokens = 0;  // 0 = no limit; see above
  // > 0: the samples needed to hold this many tokens, the same as without it up to there (the last may be
  // shorter), read with work and memory that grow with the budget: records after are not tokenized and a text
  // document only as far as needed (calibration reads 64 MB of text for its 4,096 tokens). Chat and pair records
  // are tokenized whole. The summary counts what was read.
  int64_t token_budget = 0;
  // What the samples are for, in messages about samples without a scored token ("train on", "evaluate").
  std::string_view goal = "train on";
};

struct DatasetSummary {
  std::filesystem::path path;
  DataFormat format = DataFormat::Auto;  // the format actually read
  int64_t records = 0;                   // conversations, pairs or text documents found in the file
  int64_t samples = 0;                   // samples kept (a split text document gives several)
  int64_t skipped_no_assistant = 0;      // conversations without an assistant message
  int64_t skipped_no_trained_tokens = 0;
  int64_t truncated = 0;            // chat / pair samples cut to max_tokens
  int64_t split_documents = 0;      // text documents cut into several samples
  int64_t split_conversations = 0;  // conversations trained as several samples (tokenizer/chat.h)
  int64_t tokens = 0;               // in kept samples
  int64_t trained_tokens = 0;       // targets that carry loss (trained_token_count summed)
  int64_t longest_sample_tokens = 0;
  int64_t max_tokens = 0;  // the limit applied (0 = none)
  // Preference pairs (data/preference_data.h): records are pairs, samples their completions (two a pair).
  bool preference_pairs = false;

  double average_sample_tokens() const { return samples ? static_cast<double>(tokens) / samples : 0.0; }
};

struct Dataset {
  std::vector<Sample> samples;  // in file order
  DatasetSummary summary;
};

// Reads, validates and tokenizes `path` (tokenization runs on all OpenMP threads; the result does not depend
// on the thread count). Throws Error as described above.
Dataset read_dataset(const std::filesystem::path& path, const Tokenizer& tokenizer, const DatasetOptions& options);
// The same for data already in memory: `name` stands for the file in messages, `format` is Jsonl, Tsv or Text.
Dataset parse_dataset(const std::string& content, const std::string& name, DataFormat format,
                      const Tokenizer& tokenizer, const DatasetOptions& options);

// The format `path` is read as: `requested` unless Auto, else by extension (case-insensitive). An unknown
// extension is an Error listing the known ones and the --data-format flag.
DataFormat detect_data_format(const std::filesystem::path& path, DataFormat requested = DataFormat::Auto);

// Flag values: "auto" | "jsonl" | "tsv" | "text";  "chat" | "raw";  "whole-file" | "blank-lines".
// Error listing the choices otherwise.
DataFormat parse_data_format(std::string_view name);
PairTemplate parse_pair_template(std::string_view name);
TextSplit parse_text_split(std::string_view name);
std::string_view data_format_name(DataFormat format);
std::string_view pair_template_name(PairTemplate pair_template);

// Multi-line, human-readable report of a summary (what the train command prints before training).
std::string describe_dataset_summary(const DatasetSummary& summary);

}  // namespace nvfp4lm
