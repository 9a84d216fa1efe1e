// Dataset readers (data/dataset.h) with the bundled Qwen3 tokenizer: each format from small inline files,
// the chat loss mask, the next-token target alignment, lengths (truncation, text splitting), skips and the
// summary.
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "data/dataset.h"
#include "ops/cross_entropy.h"
#include "tokenizer/tokenizer_test_util.h"

namespace nvfp4lm::test_formats {
namespace {

using test::qwen3_tokenizer;

Dataset read(const test::TempDir& dir, const std::string& name, const std::string& content,
             const DatasetOptions& options = {}) {
  test::write_file(dir / name, content);
  return read_dataset(dir / name, qwen3_tokenizer(), options);
}

DatasetOptions instruct_options() {
  DatasetOptions options;
  options.chat_template = ChatTemplate::resolve(qwen3_tokenizer(), "qwen3-instruct-2507");
  return options;
}

int32_t id_of(const std::string& token) {
  auto id = qwen3_tokenizer().token_id(token);
  EXPECT_TRUE(id.has_value()) << token;
  return id.value_or(-1);
}

// The decoded text of every maximal run of trained tokens.
std::vector<std::string> trained_runs(const Sample& sample) {
  std::vector<std::string> runs;
  std::vector<int32_t> run;
  for (size_t i = 0; i <= sample.ids.size(); ++i) {
    if (i < sample.ids.size() && sample.train_mask[i]) {
      run.push_back(sample.ids[i]);
    } else if (!run.empty()) {
      runs.push_back(qwen3_tokenizer().decode(run));
      run.clear();
    }
  }
  return runs;
}

TEST(DataFormats, ChatMessagesTrainOnlyAssistantContentAndItsImEnd) {
  test::TempDir dir;
  const std::string line =
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"},)"
      R"( {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "2+2?"},)"
      R"( {"role": "assistant", "content": "4"}]})";
  Dataset data = read(dir, "chat.jsonl", line + "\n", instruct_options());
  ASSERT_EQ(data.samples.size(), 1u);
  const Sample& sample = data.samples[0];
  EXPECT_EQ(sample.source_line, 1);

  const std::vector<ChatMessage> messages = {{"system", "Be brief."},
                                             {"user", "Hi there"},
                                             {"assistant", "Hello! How can I help?"},
                                             {"user", "2+2?"},
                                             {"assistant", "4"}};
  const std::vector<EncodedChat> samples =
      encode_chat(qwen3_tokenizer(), ChatTemplate::resolve(qwen3_tokenizer(), "qwen3-instruct-2507"), messages);
  ASSERT_EQ(samples.size(), 1u);
  const EncodedChat& expected = samples[0];
  EXPECT_EQ(sample.ids, expected.ids);
  EXPECT_EQ(sample.train_mask, expected.train_mask);

  EXPECT_EQ(trained_runs(sample), (std::vector<std::string>{"Hello! How can I help?<|im_end|>", "4<|im_end|>"}));
  // Each trained <|im_end|> is followed by an untrained "\n".
  const int32_t im_end = qwen3_tokenizer().special_ids().im_end;
  const int32_t newline = id_of("Ċ");
  int trained_im_ends = 0;
  for (size_t i = 0; i + 1 < sample.ids.size(); ++i) {
    if (sample.ids[i] == im_end && sample.train_mask[i]) {
      ++trained_im_ends;
      EXPECT_EQ(sample.ids[i + 1], newline);
      EXPECT_EQ(sample.train_mask[i + 1], 0);
    }
  }
  EXPECT_EQ(trained_im_ends, 2);
  EXPECT_EQ(data.summary.trained_tokens, trained_token_count(sample));
}

TEST(DataFormats, DefaultChatStyleIsTheTokenizersTemplate) {
  // The bundled tokenizer_config.json carries the hybrid-thinking template: the last assistant turn gets an
  // (empty) think block, which is trained as part of the answer.
  test::TempDir dir;
  Dataset data = read(dir, "chat.jsonl",
                      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})");
  ASSERT_EQ(data.samples.size(), 1u);
  EXPECT_EQ(trained_runs(data.samples[0]), (std::vector<std::string>{"<think>\n\n</think>\n\nYo<|im_end|>"}));
}

TEST(DataFormats, NextTokenTargetsOfAHandBuiltChat) {
  // <|im_start|> user \n Hi <|im_end|> \n <|im_start|> assistant \n Hello <|im_end|> \n
  const Tokenizer& tok = qwen3_tokenizer();
  const int32_t start = tok.special_ids().im_start, end = tok.special_ids().im_end;
  const int32_t user = id_of("user"), assistant = id_of("assistant"), nl = id_of("Ċ");
  const int32_t hi = id_of("Hi"), hello = id_of("Hello");
  Sample sample;
  sample.ids = {start, user, nl, hi, end, nl, start, assistant, nl, hello, end, nl};
  sample.train_mask = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0};

  // The hand-built sample is exactly what encode_chat produces.
  const ChatMessage messages[] = {{"user", "Hi"}, {"assistant", "Hello"}};
  const std::vector<EncodedChat> encoded =
      encode_chat(tok, ChatTemplate::resolve(tok, "qwen3-instruct-2507"), messages);
  ASSERT_EQ(encoded.size(), 1u);
  EXPECT_EQ(encoded[0].ids, sample.ids);
  EXPECT_EQ(encoded[0].train_mask, sample.train_mask);

  const int32_t ig = kIgnoreIndex;
  // Position 8 (the "\n" after "assistant") predicts "Hello"; position 9 ("Hello") predicts <|im_end|>; the
  // <|im_end|> does not predict the "\n" after it; the last token predicts nothing.
  const std::vector<int32_t> expected = {ig, ig, ig, ig, ig, ig, ig, ig, hello, end, ig, ig};
  EXPECT_EQ(next_token_targets(sample), expected);
  EXPECT_EQ(trained_token_count(sample), 2);
}

TEST(DataFormats, PromptCompletionDefaultsToChat) {
  test::TempDir dir;
  Dataset pairs = read(dir, "pairs.jsonl",
                       R"({"prompt": "Capital of France?", "completion": "Paris."})"
                       "\n",
                       instruct_options());
  Dataset chats = read(dir, "chats.jsonl",
                       R"({"messages": [{"role": "user", "content": "Capital of France?"},)"
                       R"( {"role": "assistant", "content": "Paris."}]})",
                       instruct_options());
  ASSERT_EQ(pairs.samples.size(), 1u);
  ASSERT_EQ(chats.samples.size(), 1u);
  EXPECT_EQ(pairs.samples[0].ids, chats.samples[0].ids);
  EXPECT_EQ(pairs.samples[0].train_mask, chats.samples[0].train_mask);
  EXPECT_EQ(trained_runs(pairs.samples[0]), (std::vector<std::string>{"Paris.<|im_end|>"}));
}

TEST(DataFormats, RawTemplateIsPromptThenCompletionThenEos) {
  test::TempDir dir;
  DatasetOptions options;
  options.pair_template = PairTemplate::Raw;
  Dataset data = read(dir, "pairs.jsonl", R"({"prompt": "The sky is", "completion": " blue."})", options);
  ASSERT_EQ(data.samples.size(), 1u);
  const Tokenizer& tok = qwen3_tokenizer();
  std::vector<int32_t> prompt = tok.encode("The sky is");
  std::vector<int32_t> completion = tok.encode(" blue.");
  std::vector<int32_t> ids = prompt;
  ids.insert(ids.end(), completion.begin(), completion.end());
  ids.push_back(tok.special_ids().eos);
  EXPECT_EQ(data.samples[0].ids, ids);
  std::vector<uint8_t> mask(ids.size(), 1);
  std::fill(mask.begin(), mask.begin() + static_cast<std::ptrdiff_t>(prompt.size()), 0);
  EXPECT_EQ(data.samples[0].train_mask, mask);
}

TEST(DataFormats, TsvSkipsCommentsAndBlankLinesAndUnescapes) {
  test::TempDir dir;
  DatasetOptions options = instruct_options();
  options.pair_template = PairTemplate::Raw;
  const std::string file =
      "# a comment line\n"
      "\n"
      "What is 2+2?\t4\r\n"
      "   \n"
      "\\#hash\tline one\\nline two\\ttab \\\\ \\x\n";
  Dataset data = read(dir, "pairs.tsv", file, options);
  ASSERT_EQ(data.samples.size(), 2u);
  EXPECT_EQ(data.summary.records, 2);
  EXPECT_EQ(data.samples[0].source_line, 3);
  EXPECT_EQ(data.samples[1].source_line, 5);
  const Tokenizer& tok = qwen3_tokenizer();
  EXPECT_EQ(tok.decode(data.samples[0].ids), "What is 2+2?4<|im_end|>");
  EXPECT_EQ(tok.decode(data.samples[1].ids), "#hashline one\nline two\ttab \\ \\x<|im_end|>");
}

TEST(DataFormats, TsvRendersLikePromptCompletion) {
  test::TempDir dir;
  Dataset tsv = read(dir, "a.tsv", "Capital of France?\tParis.\n", instruct_options());
  Dataset jsonl =
      read(dir, "a.jsonl", R"({"prompt": "Capital of France?", "completion": "Paris."})", instruct_options());
  ASSERT_EQ(tsv.samples.size(), 1u);
  EXPECT_EQ(tsv.samples[0].ids, jsonl.samples[0].ids);
  EXPECT_EQ(tsv.samples[0].train_mask, jsonl.samples[0].train_mask);
}

TEST(DataFormats, PlainTextWholeFileOrBlankLineDocuments) {
  test::TempDir dir;
  const std::string text = "First paragraph,\nstill first.\n\n\nSecond one.\n  \nThird.\n";
  const Tokenizer& tok = qwen3_tokenizer();
  const int32_t eot = tok.special_ids().endoftext;

  Dataset whole = read(dir, "t.txt", text);
  ASSERT_EQ(whole.samples.size(), 1u);
  std::vector<int32_t> ids = tok.encode(text);
  ids.push_back(eot);
  EXPECT_EQ(whole.samples[0].ids, ids);
  EXPECT_EQ(whole.samples[0].train_mask, std::vector<uint8_t>(ids.size(), 1));

  DatasetOptions options;
  options.text_split = TextSplit::BlankLines;
  Dataset docs = read(dir, "t.txt", text, options);
  ASSERT_EQ(docs.samples.size(), 3u);
  const std::vector<std::string> expected = {"First paragraph,\nstill first.", "Second one.", "Third."};
  const std::vector<int64_t> lines = {1, 5, 7};
  for (size_t i = 0; i < 3; ++i) {
    std::vector<int32_t> doc = tok.encode(expected[i]);
    doc.push_back(eot);
    EXPECT_EQ(docs.samples[i].ids, doc) << i;
    EXPECT_EQ(docs.samples[i].source_line, lines[i]);
  }
  EXPECT_EQ(docs.summary.trained_tokens, docs.summary.tokens - 3);  // each document's first token is not predicted
}

TEST(DataFormats, LongTextIsSplitSoEveryTokenIsPredictedOnce) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "word" + std::to_string(i) + " ";
  DatasetOptions options;
  options.max_tokens = 16;
  Dataset data = read(dir, "long.txt", text, options);
  std::vector<int32_t> all = qwen3_tokenizer().encode(text);
  all.push_back(qwen3_tokenizer().special_ids().endoftext);
  ASSERT_GT(all.size(), 40u);
  EXPECT_EQ(data.summary.split_documents, 1);
  EXPECT_EQ(data.summary.truncated, 0);
  ASSERT_GT(data.samples.size(), 2u);
  std::vector<int32_t> predicted;
  for (const Sample& piece : data.samples) {
    EXPECT_LE(piece.ids.size(), 16u);
    for (int32_t target : next_token_targets(piece)) {
      if (target != kIgnoreIndex) predicted.push_back(target);
    }
  }
  EXPECT_EQ(predicted, std::vector<int32_t>(all.begin() + 1, all.end()));
  EXPECT_EQ(data.summary.trained_tokens, static_cast<int64_t>(all.size()) - 1);
}

TEST(DataFormats, LongChatIsTruncatedAndCountedOrAnErrorWhenStrict) {
  test::TempDir dir;
  std::string answer;
  for (int i = 0; i < 50; ++i) answer += "yes ";
  const std::string file = R"({"prompt": "short", "completion": "ok"})"
                           "\n"
                           R"({"prompt": "Say yes a lot", "completion": ")" +
                           answer + "\"}\n";
  DatasetOptions options = instruct_options();
  options.max_tokens = 24;
  Dataset data = read(dir, "long.jsonl", file, options);
  ASSERT_EQ(data.samples.size(), 2u);
  EXPECT_EQ(data.summary.truncated, 1);
  EXPECT_EQ(data.samples[1].ids.size(), 24u);
  EXPECT_EQ(data.summary.longest_sample_tokens, 24);
  EXPECT_NE(describe_dataset_summary(data.summary).find("1 truncated"), std::string::npos);

  options.strict = true;
  try {
    read(dir, "long.jsonl", file, options);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("long.jsonl line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("seq_len 24"), std::string::npos) << e.what();
  }
}

TEST(DataFormats, SamplesWithNothingToTrainAreSkippedOrAnErrorWhenStrict) {
  test::TempDir dir;
  const std::string long_prompt(300, 'x');
  const std::string file =
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]})"
      "\n"
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "no answer"}]})"
      "\n"
      R"({"prompt": ")" +
      long_prompt + R"(", "completion": "cut away"})" + "\n";
  DatasetOptions options = instruct_options();
  options.max_tokens = 20;
  Dataset data = read(dir, "mixed.jsonl", file, options);
  EXPECT_EQ(data.summary.records, 3);
  EXPECT_EQ(data.summary.samples, 1);
  EXPECT_EQ(data.summary.skipped_no_assistant, 1);
  EXPECT_EQ(data.summary.skipped_no_trained_tokens, 1);
  EXPECT_EQ(data.samples[0].source_line, 1);

  options.strict = true;
  try {
    read(dir, "mixed.jsonl", file, options);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mixed.jsonl line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no assistant message"), std::string::npos) << e.what();
  }
}

TEST(DataFormats, TrainOnEverythingMasksAllTokens) {
  test::TempDir dir;
  DatasetOptions options = instruct_options();
  options.train_on_everything = true;
  const std::string file =
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]})"
      "\n"
      R"({"messages": [{"role": "user", "content": "no answer, kept"}]})";
  Dataset data = read(dir, "all.jsonl", file, options);
  ASSERT_EQ(data.samples.size(), 2u);
  for (const Sample& sample : data.samples) {
    EXPECT_EQ(sample.train_mask, std::vector<uint8_t>(sample.ids.size(), 1));
  }
  EXPECT_EQ(data.summary.trained_tokens, data.summary.tokens - 2);
}

TEST(DataFormats, LastAssistantTurnOnly) {
  test::TempDir dir;
  DatasetOptions options = instruct_options();
  options.train_all_assistant_turns = false;
  Dataset data = read(dir, "c.jsonl",
                      R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},)"
                      R"( {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]})",
                      options);
  EXPECT_EQ(trained_runs(data.samples[0]), (std::vector<std::string>{"d<|im_end|>"}));
}

TEST(DataFormats, JsonArrayBomAndCrlf) {
  test::TempDir dir;
  const std::string array =
      "\xEF\xBB\xBF[\r\n {\"prompt\": \"p1\", \"completion\": \"c1\"},\r\n"
      " {\"messages\": [{\"role\": \"user\", \"content\": \"p2\"}, {\"role\": \"assistant\", \"content\": "
      "\"c2\"}]}\r\n]";
  Dataset data = read(dir, "array.json", array, instruct_options());
  ASSERT_EQ(data.samples.size(), 2u);
  EXPECT_EQ(data.samples[1].source_line, 2);  // entry number
  EXPECT_EQ(trained_runs(data.samples[1]), (std::vector<std::string>{"c2<|im_end|>"}));

  const std::string lines = "\xEF\xBB\xBF{\"prompt\": \"p1\", \"completion\": \"c1\"}\r\n\r\n";
  Dataset crlf = read(dir, "crlf.jsonl", lines, instruct_options());
  ASSERT_EQ(crlf.samples.size(), 1u);
  EXPECT_EQ(crlf.samples[0].ids, data.samples[0].ids);

  Dataset text = read(dir, "crlf.txt", "\xEF\xBB\xBFline one\r\nline two\r\n");
  std::vector<int32_t> ids = qwen3_tokenizer().encode("line one\nline two\n");
  ids.push_back(qwen3_tokenizer().special_ids().endoftext);
  EXPECT_EQ(text.samples[0].ids, ids);
}

TEST(DataFormats, FormatComesFromTheExtensionOrTheOverride) {
  EXPECT_EQ(detect_data_format("a/b.jsonl"), DataFormat::Jsonl);
  EXPECT_EQ(detect_data_format("b.JSON"), DataFormat::Jsonl);
  EXPECT_EQ(detect_data_format("b.tsv"), DataFormat::Tsv);
  EXPECT_EQ(detect_data_format("b.txt"), DataFormat::Text);
  EXPECT_EQ(detect_data_format("b.csv", DataFormat::Tsv), DataFormat::Tsv);
  try {
    detect_data_format("data/b.csv");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* part : {"data/b.csv", ".csv", ".jsonl", ".tsv", ".txt", "--data-format"}) {
      EXPECT_NE(message.find(part), std::string::npos) << part << " missing in: " << message;
    }
  }
  EXPECT_EQ(parse_data_format("tsv"), DataFormat::Tsv);
  EXPECT_EQ(parse_pair_template("raw"), PairTemplate::Raw);
  EXPECT_EQ(parse_text_split("blank-lines"), TextSplit::BlankLines);
  EXPECT_THROW(parse_data_format("csv"), Error);
  EXPECT_THROW(parse_pair_template("alpaca"), Error);
  EXPECT_THROW(parse_text_split("lines"), Error);

  // The override decides how the file is read: the same text as TSV or as plain text.
  test::TempDir dir;
  DatasetOptions options = instruct_options();
  options.format = DataFormat::Tsv;
  Dataset data = read(dir, "pairs.data", "q\ta\n", options);
  EXPECT_EQ(data.summary.format, DataFormat::Tsv);
  EXPECT_EQ(trained_runs(data.samples[0]), (std::vector<std::string>{"a<|im_end|>"}));
}

TEST(DataFormats, SummaryCountsAndDescription) {
  test::TempDir dir;
  Dataset data = read(dir, "s.tsv", "a\tb\nc d\te f g\n", instruct_options());
  const DatasetSummary& s = data.summary;
  EXPECT_EQ(s.records, 2);
  EXPECT_EQ(s.samples, 2);
  int64_t tokens = 0, trained = 0, longest = 0;
  for (const Sample& sample : data.samples) {
    tokens += static_cast<int64_t>(sample.ids.size());
    trained += trained_token_count(sample);
    longest = std::max<int64_t>(longest, sample.ids.size());
  }
  EXPECT_EQ(s.tokens, tokens);
  EXPECT_EQ(s.trained_tokens, trained);
  EXPECT_EQ(s.longest_sample_tokens, longest);
  EXPECT_DOUBLE_EQ(s.average_sample_tokens(), tokens / 2.0);
  const std::string text = describe_dataset_summary(s);
  EXPECT_NE(text.find("2 records -> 2 samples"), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("{} total, {} trained", tokens, trained)), std::string::npos) << text;
}

}  // namespace
}  // namespace nvfp4lm::test_formats
