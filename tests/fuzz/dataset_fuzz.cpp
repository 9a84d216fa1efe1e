#include "dataset_fuzz.h"

#include "data/dataset_records.h"
#include "data/sample.h"
#include "fuzz_util.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm::fuzz {
namespace {

DatasetOptions options_for(size_t size, DataFormat format, const Tokenizer& tokenizer) {
  DatasetOptions options;
  options.format = format;
  options.strict = size & 1;
  options.max_tokens = (size & 2) ? 24 : 0;
  options.pair_template = (size & 4) ? PairTemplate::Raw : PairTemplate::Chat;
  options.text_split = (size & 8) ? TextSplit::BlankLines : TextSplit::WholeFile;
  options.train_all_assistant_turns = !(size & 16);
  options.train_on_everything = size & 32;
  static const ChatTemplate thinking = ChatTemplate::resolve(tokenizer, "qwen3-thinking-2507");
  if (size & 64) options.chat_template = thinking;
  options.train_reasoning = !(size & 128);
  return options;
}

void check_records(const data::ParsedFile& parsed, DataFormat format) {
  for (const data::RawRecord& record : parsed.records) {
    FUZZ_CHECK(record.line >= 1, "record at line {}", record.line);
    if (format == DataFormat::Text) FUZZ_CHECK(record.kind == data::RecordKind::Text, "non-text record from text");
    if (format == DataFormat::Tsv) FUZZ_CHECK(record.kind == data::RecordKind::Pair, "non-pair record from TSV");
    if (format == DataFormat::Jsonl) FUZZ_CHECK(record.kind != data::RecordKind::Text, "text record from JSONL");
  }
}

void parse_records(std::string_view content, DataFormat format, size_t size) {
  if (!tokenizer::is_valid_utf8(content)) return;
  expect_error_only([&] {
    const std::string file = "fuzz-data";
    switch (format) {
      case DataFormat::Jsonl:
        check_records(data::parse_jsonl(content, file), format);
        break;
      case DataFormat::Tsv:
        check_records(data::parse_tsv(content, file), format);
        break;
      default:
        check_records(data::parse_text(content, (size & 8) ? TextSplit::BlankLines : TextSplit::WholeFile), format);
        break;
    }
  });
}

}  // namespace

void fuzz_dataset(const uint8_t* data, size_t size, DataFormat format) {
  static const Tokenizer tokenizer = Tokenizer::load(source_path("tests/fixtures/tiny-tokenizer"));
  const std::string_view content = as_text(data, size);
  parse_records(content, format, size);

  const char* extension = format == DataFormat::Jsonl ? "jsonl" : format == DataFormat::Tsv ? "tsv" : "txt";
  const fs::path path = write_scratch_file(std::string("data.") + extension, content);
  const DatasetOptions options = options_for(size, format, tokenizer);
  expect_error_only([&] {
    const Dataset dataset = read_dataset(path, tokenizer, options);
    const DatasetSummary& summary = dataset.summary;
    FUZZ_CHECK(summary.samples == static_cast<int64_t>(dataset.samples.size()), "summary counts {} samples of {}",
               summary.samples, dataset.samples.size());
    int64_t tokens = 0, trained = 0;
    for (const Sample& sample : dataset.samples) {
      FUZZ_CHECK(!sample.ids.empty() && sample.ids.size() == sample.train_mask.size(),
                 "line {}: {} ids, {} mask entries", sample.source_line, sample.ids.size(), sample.train_mask.size());
      FUZZ_CHECK(options.max_tokens == 0 || static_cast<int64_t>(sample.ids.size()) <= options.max_tokens,
                 "line {}: {} tokens, more than max_tokens {}", sample.source_line, sample.ids.size(),
                 options.max_tokens);
      for (int32_t id : sample.ids) {
        FUZZ_CHECK(id >= 0 && static_cast<size_t>(id) < tokenizer.vocab_size(), "line {}: id {}", sample.source_line,
                   id);
      }
      tokens += static_cast<int64_t>(sample.ids.size());
      trained += trained_token_count(sample);
    }
    FUZZ_CHECK(summary.tokens == tokens && summary.trained_tokens == trained,
               "summary counts {} tokens ({} trained), the samples have {} ({})", summary.tokens,
               summary.trained_tokens, tokens, trained);
    (void)describe_dataset_summary(summary);
  });
}

}  // namespace nvfp4lm::fuzz
