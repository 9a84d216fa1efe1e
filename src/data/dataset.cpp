// read_dataset (dataset.h): parse the file into records (dataset_{jsonl,tsv,text}.cpp), tokenize them in
// parallel, then apply lengths, skips and masks in file order so that errors and counts are deterministic.
#include "data/dataset.h"

#include <algorithm>
#include <cctype>
#include <exception>

#include "core/error.h"
#include "core/text_excerpt.h"
#include "data/dataset_records.h"

namespace nvfp4lm {
namespace {

using data::RawRecord;
using data::RecordKind;
using data::Rendering;
using data::rendering_for;
using data::tokenize;

bool has_assistant(const RawRecord& record) {
  return std::any_of(record.messages.begin(), record.messages.end(),
                     [](const ChatMessage& m) { return m.role == "assistant"; });
}

// Cuts a text document into pieces of at most max_tokens tokens, each starting at the previous one's last token.
void split_document(Sample&& document, int64_t max_tokens, std::vector<Sample>& out) {
  const size_t n = document.ids.size();
  const size_t length = static_cast<size_t>(max_tokens);
  for (size_t begin = 0;; begin += length - 1) {
    const size_t end = std::min(begin + length, n);
    Sample piece;
    piece.source_line = document.source_line;
    piece.ids.assign(document.ids.begin() + static_cast<std::ptrdiff_t>(begin),
                     document.ids.begin() + static_cast<std::ptrdiff_t>(end));
    piece.train_mask.assign(document.train_mask.begin() + static_cast<std::ptrdiff_t>(begin),
                            document.train_mask.begin() + static_cast<std::ptrdiff_t>(end));
    out.push_back(std::move(piece));
    if (end == n) break;
  }
}

}  // namespace

namespace data {

// The record's samples: one, or several for a conversation whose template renders turns apart (tokenizer/chat.h).
// `text_budget`: a text document is tokenized only that far (SIZE_MAX: whole); a document cut short ends without
// <|endoftext|>.
std::vector<Sample> tokenize(const RawRecord& record, const Tokenizer& tokenizer, const Rendering& rendering,
                             size_t text_budget) {
  Sample sample;
  sample.source_line = record.line;
  if (record.kind == RecordKind::Text) {
    bool cut = false;
    if (text_budget == SIZE_MAX) {
      sample.ids = tokenizer.encode(record.text);
    } else {
      cut = tokenizer.encode_prefix(record.text, text_budget, sample.ids);
    }
    if (!cut) sample.ids.push_back(rendering.endoftext);
    sample.train_mask.assign(sample.ids.size(), 1);
  } else if (record.kind == RecordKind::Pair && rendering.pair_template == PairTemplate::Raw) {
    sample.ids = tokenizer.encode(record.prompt);
    sample.train_mask.assign(sample.ids.size(), 0);
    tokenizer.encode_append(record.target, sample.ids);
    sample.ids.push_back(rendering.eos);
    sample.train_mask.resize(sample.ids.size(), 1);
  } else {
    std::vector<EncodedChat> chats;
    if (record.kind == RecordKind::Pair) {
      const ChatMessage messages[] = {{"user", record.prompt}, {"assistant", record.target}};
      chats = encode_chat(tokenizer, *rendering.chat_template, messages, rendering.chat);
    } else {
      ChatTrainOptions options = rendering.chat;
      options.tools = record.tools;
      chats = encode_chat(tokenizer, *rendering.chat_template, record.messages, options);
    }
    std::vector<Sample> samples;
    for (EncodedChat& chat : chats) {
      Sample& turn = samples.emplace_back();
      turn.source_line = record.line;
      turn.ids = std::move(chat.ids);
      turn.train_mask = std::move(chat.train_mask);
    }
    return samples;
  }
  std::vector<Sample> samples;
  samples.push_back(std::move(sample));
  return samples;
}

Rendering rendering_for(const Tokenizer& tokenizer, const DatasetOptions& options, RecordKind kinds_present) {
  Rendering rendering;
  if (kinds_present != RecordKind::Text)
    rendering.chat_template = options.chat_template ? *options.chat_template : ChatTemplate::resolve(tokenizer);
  rendering.chat.train_all_assistant_turns = options.train_all_assistant_turns;
  rendering.chat.train_reasoning = options.train_reasoning;
  rendering.pair_template = options.pair_template;
  const SpecialTokenIds& special = tokenizer.special_ids();
  rendering.endoftext = special.endoftext;
  rendering.eos = special.eos >= 0 ? special.eos : special.endoftext;
  if (kinds_present == RecordKind::Text) {
    NVFP4LM_CHECK(rendering.endoftext >= 0, "tokenizer {} has no <|endoftext|> token to end text documents with",
                  tokenizer.origin());
  }
  return rendering;
}

}  // namespace data

Dataset read_dataset(const std::filesystem::path& path, const Tokenizer& tokenizer, const DatasetOptions& options) {
  const DataFormat format = detect_data_format(path, options.format);
  Dataset dataset = parse_dataset(data::read_dataset_text(path), path.string(), format, tokenizer, options);
  dataset.summary.path = path;
  return dataset;
}

Dataset parse_dataset(const std::string& content, const std::string& file, DataFormat format,
                      const Tokenizer& tokenizer, const DatasetOptions& options) {
  NVFP4LM_CHECK(format != DataFormat::Auto, "dataset {}: name its format (jsonl, tsv or text)", file);
  NVFP4LM_CHECK(options.max_tokens == 0 || options.max_tokens >= 2,
                "dataset {}: max_tokens (seq_len) {} is too small; a sample needs at least 2 tokens", file,
                options.max_tokens);
  data::ParsedFile parsed;
  switch (format) {
    case DataFormat::Jsonl:
      parsed = data::parse_jsonl(content, file);
      break;
    case DataFormat::Tsv:
      parsed = data::parse_tsv(content, file);
      break;
    case DataFormat::Text:
      parsed = data::parse_text(content, options.text_split);
      break;
    case DataFormat::Auto:
      NVFP4LM_ASSERT(false, "format not resolved");
      break;
  }
  const std::vector<RawRecord>& records = parsed.records;
  const Rendering rendering =
      rendering_for(tokenizer, options, format == DataFormat::Text ? RecordKind::Text : RecordKind::Chat);
  if (options.pair_template == PairTemplate::Raw && format != DataFormat::Text) {
    NVFP4LM_CHECK(rendering.eos >= 0, "dataset {}: raw template needs an EOS token, and tokenizer {} has none", file,
                  tokenizer.origin());
  }

  // Tokenize (in parallel without a token budget; with one, record by record below, each only as far as the
  // budget still needs); errors are kept per record and the first in file order is thrown below.
  const int64_t count = static_cast<int64_t>(records.size());
  const bool budgeted = options.token_budget > 0;
  std::vector<std::vector<Sample>> tokenized(records.size());
  std::vector<std::string> errors(records.size());
  std::vector<uint8_t> skip_no_assistant(records.size(), 0);
  auto tokenize_record = [&](size_t i, size_t text_budget) {
    const RawRecord& record = records[i];
    if (record.kind == RecordKind::Chat && !has_assistant(record) && !options.train_on_everything) {
      skip_no_assistant[i] = 1;
      return;
    }
    try {
      tokenized[i] = tokenize(record, tokenizer, rendering, text_budget);
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  };
  if (!budgeted) {
#pragma omp parallel for schedule(dynamic, 8)
    for (int64_t i = 0; i < count; ++i) tokenize_record(static_cast<size_t>(i), SIZE_MAX);
  }

  Dataset dataset;
  DatasetSummary& summary = dataset.summary;
  summary.path = file;
  summary.format = format;
  summary.records = count;
  summary.max_tokens = options.max_tokens;
  for (size_t i = 0; i < records.size(); ++i) {
    if (budgeted) {
      if (summary.tokens >= options.token_budget) break;
      // One token more than the budget still needs: text pieces overlap by one (split_document).
      tokenize_record(i, static_cast<size_t>(options.token_budget - summary.tokens) + 1);
    }
    const std::string place = data::where(file, records[i].line, parsed.numbered_by_entry);
    NVFP4LM_CHECK(errors[i].empty(), "{}: {}", place, errors[i]);
    if (skip_no_assistant[i]) {
      NVFP4LM_CHECK(!options.strict,
                    "{}: conversation has no assistant message, so nothing to {} (drop it, or score every token with "
                    "train_on_everything)",
                    place, options.goal);
      ++summary.skipped_no_assistant;
      continue;
    }
    std::vector<Sample> pieces;
    for (Sample& sample : tokenized[i]) {
      if (options.train_on_everything) std::fill(sample.train_mask.begin(), sample.train_mask.end(), 1);
      const auto length = static_cast<int64_t>(sample.ids.size());
      if (options.max_tokens > 0 && length > options.max_tokens && records[i].kind == RecordKind::Text) {
        ++summary.split_documents;
        split_document(std::move(sample), options.max_tokens, pieces);
        continue;
      }
      if (options.max_tokens > 0 && length > options.max_tokens) {
        NVFP4LM_CHECK(!options.strict,
                      "{}: sample has {} tokens, more than seq_len {} (strict mode; without it the "
                      "sample is truncated)",
                      place, length, options.max_tokens);
        ++summary.truncated;
        sample.ids.resize(static_cast<size_t>(options.max_tokens));
        sample.train_mask.resize(static_cast<size_t>(options.max_tokens));
      }
      pieces.push_back(std::move(sample));
    }
    if (tokenized[i].size() > 1) summary.split_conversations += 1;
    for (Sample& piece : pieces) {
      const int64_t trained = trained_token_count(piece);
      if (trained == 0) {
        NVFP4LM_CHECK(!options.strict, "{}: no token left to {} ({} tokens{}); strict mode", place, options.goal,
                      piece.ids.size(),
                      options.max_tokens > 0 ? fmt::format(", seq_len {}", options.max_tokens) : std::string());
        ++summary.skipped_no_trained_tokens;
        continue;
      }
      summary.tokens += static_cast<int64_t>(piece.ids.size());
      summary.trained_tokens += trained;
      summary.longest_sample_tokens = std::max<int64_t>(summary.longest_sample_tokens, piece.ids.size());
      dataset.samples.push_back(std::move(piece));
    }
  }
  summary.samples = static_cast<int64_t>(dataset.samples.size());
  NVFP4LM_CHECK(summary.samples > 0,
                "dataset {}: no sample to {} ({} records read, {} without an assistant message, {} with no "
                "scored token left)",
                file, options.goal, summary.records, summary.skipped_no_assistant, summary.skipped_no_trained_tokens);
  return dataset;
}

DataFormat detect_data_format(const std::filesystem::path& path, DataFormat requested) {
  if (requested != DataFormat::Auto) return requested;
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (extension == ".jsonl" || extension == ".json") return DataFormat::Jsonl;
  if (extension == ".tsv") return DataFormat::Tsv;
  if (extension == ".txt") return DataFormat::Text;
  NVFP4LM_FAIL(
      "dataset {}: cannot tell the format from the extension {}; known: .jsonl/.json (JSON lines with "
      "\"messages\" or \"prompt\"/\"completion\"), .tsv (prompt<TAB>target), .txt (plain text); or name it with "
      "--data-format jsonl|tsv|text",
      path.string(), quoted_excerpt(extension));
}

DataFormat parse_data_format(std::string_view name) {
  if (name == "auto") return DataFormat::Auto;
  if (name == "jsonl") return DataFormat::Jsonl;
  if (name == "tsv") return DataFormat::Tsv;
  if (name == "text") return DataFormat::Text;
  NVFP4LM_FAIL("unknown data format {}; use auto, jsonl, tsv or text", quoted_excerpt(name));
}

PairTemplate parse_pair_template(std::string_view name) {
  if (name == "chat") return PairTemplate::Chat;
  if (name == "raw") return PairTemplate::Raw;
  NVFP4LM_FAIL("unknown data template {}; use chat or raw", quoted_excerpt(name));
}

TextSplit parse_text_split(std::string_view name) {
  if (name == "whole-file") return TextSplit::WholeFile;
  if (name == "blank-lines") return TextSplit::BlankLines;
  NVFP4LM_FAIL("unknown text split {}; use whole-file or blank-lines", quoted_excerpt(name));
}

std::string_view data_format_name(DataFormat format) {
  switch (format) {
    case DataFormat::Auto:
      return "auto";
    case DataFormat::Jsonl:
      return "jsonl";
    case DataFormat::Tsv:
      return "tsv";
    case DataFormat::Text:
      return "text";
  }
  return "?";
}

std::string_view pair_template_name(PairTemplate pair_template) {
  return pair_template == PairTemplate::Chat ? "chat" : "raw";
}

std::string describe_dataset_summary(const DatasetSummary& s) {
  if (s.preference_pairs) {
    std::string text = fmt::format("preference data {} ({}): {} pairs -> {} pairs kept ({} completions)\n",
                                   s.path.string(), data_format_name(s.format), s.records, s.samples / 2, s.samples);
    if (s.skipped_no_trained_tokens > 0)
      text += fmt::format("  skipped: {} pairs with a completion left with no token to train on\n",
                          s.skipped_no_trained_tokens);
    if (s.truncated > 0)
      text += fmt::format("  longer than seq_len {}: {} completions truncated\n", s.max_tokens, s.truncated);
    text +=
        fmt::format("  tokens: {} total, {} scored; completion length {:.1f} average, {} longest (prompt included)\n",
                    s.tokens, s.trained_tokens, s.average_sample_tokens(), s.longest_sample_tokens);
    return text;
  }
  std::string text = fmt::format("dataset {} ({}): {} records -> {} samples\n", s.path.string(),
                                 data_format_name(s.format), s.records, s.samples);
  if (s.skipped_no_assistant + s.skipped_no_trained_tokens > 0) {
    text += fmt::format("  skipped: {} without an assistant message, {} with no token to train on\n",
                        s.skipped_no_assistant, s.skipped_no_trained_tokens);
  }
  if (s.truncated + s.split_documents > 0) {
    text += fmt::format("  longer than seq_len {}: {} truncated, {} text documents split\n", s.max_tokens, s.truncated,
                        s.split_documents);
  }
  if (s.split_conversations > 0) {
    text += fmt::format(
        "  {} conversations trained as several samples: the chat template renders their earlier turns differently "
        "once later turns follow (e.g. without reasoning), and each turn is trained as it is generated\n",
        s.split_conversations);
  }
  const double trained_percent = s.tokens ? 100.0 * static_cast<double>(s.trained_tokens) / s.tokens : 0.0;
  text += fmt::format("  tokens: {} total, {} trained ({:.1f}%); sample length {:.1f} average, {} longest\n", s.tokens,
                      s.trained_tokens, trained_percent, s.average_sample_tokens(), s.longest_sample_tokens);
  return text;
}

}  // namespace nvfp4lm
