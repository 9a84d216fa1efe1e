// Internal to data/: the first stage of read_dataset (dataset.h) — a file's text split into records
// (a conversation, a prompt/target pair or a text document) with their line numbers, before tokenization.
// Every parser checks its format completely and throws Error naming "<file> line N" (or "entry N") and the
// problem; tokenization and masking happen later, in dataset.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"
#include "tokenizer/chat.h"

namespace nvfp4lm::data {

enum class RecordKind { Chat, Pair, Text };

struct RawRecord {
  RecordKind kind = RecordKind::Text;
  int64_t line = 0;                   // 1-based line (or entry number of a JSON array) where it starts
  std::vector<ChatMessage> messages;  // Chat
  nlohmann::ordered_json tools;       // Chat: the record's "tools" (null: none)
  std::string prompt;                 // Pair
  std::string target;                 // Pair
  std::string text;                   // Text
};

struct ParsedFile {
  std::vector<RawRecord> records;
  bool numbered_by_entry = false;  // a JSON array: record.line is the entry number
};

// How records become tokens (dataset.cpp): the chat template, what of a conversation is trained, the pair template
// and the tokens that end raw pairs and text documents.
struct Rendering {
  std::optional<ChatTemplate> chat_template;
  ChatTrainOptions chat;
  PairTemplate pair_template = PairTemplate::Chat;
  int32_t eos = -1;        // raw pairs end with it
  int32_t endoftext = -1;  // text documents end with it
};
// `kinds_present`: Text for a text file (no chat template needed), Chat otherwise.
Rendering rendering_for(const Tokenizer& tokenizer, const DatasetOptions& options, RecordKind kinds_present);

// The record's samples: one, or several for a conversation whose template renders turns apart (tokenizer/chat.h).
// `text_budget`: a text document is tokenized only that far (SIZE_MAX: whole); a document cut short ends without
// <|endoftext|>. Lengths, skips and train_on_everything are read_dataset's, not applied here.
std::vector<Sample> tokenize(const RawRecord& record, const Tokenizer& tokenizer, const Rendering& rendering,
                             size_t text_budget = SIZE_MAX);

// A dataset file's bytes with a leading UTF-8 byte-order mark removed. Error (naming the path) when it cannot be
// read or is a directory; Error naming the line and byte offset at the first byte that is not valid UTF-8.
std::string read_dataset_text(const std::filesystem::path& path);

// "<file> line N" / "<file> entry N": how messages name a place.
std::string where(const std::string& file, int64_t line, bool entry = false);

// One line of a file: text without its "\n" (and without a trailing "\r"), 1-based number.
struct Line {
  std::string_view text;
  int64_t number = 0;
};
std::vector<Line> split_lines(std::string_view content);
bool is_blank(std::string_view text);  // empty or only spaces, tabs, CR

ParsedFile parse_jsonl(std::string_view content, const std::string& file);
ParsedFile parse_tsv(std::string_view content, const std::string& file);
ParsedFile parse_text(std::string_view content, TextSplit split);

// TSV field escapes: \n \t \r \\ \# ; any other backslash is kept.
std::string unescape_tsv_field(std::string_view field);

}  // namespace nvfp4lm::data
