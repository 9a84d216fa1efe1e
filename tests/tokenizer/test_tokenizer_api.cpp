// Tokenizer API and loading: the bundled Qwen3 files, a small hand-built tokenizer.json, and the errors
// bad files and bad input give. Also the 1 MB encode (correctness only; speed is in bench/).
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer_test_util.h"

namespace nvfp4lm::test_tokenizer_api {
namespace {

using nlohmann::json;
using test::qwen3_tokenizer;

TEST(Tokenizer, BundledQwen3Basics) {
  const Tokenizer& tok = qwen3_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 151669u);
  EXPECT_TRUE(tok.normalizes_nfc());
  EXPECT_EQ(tok.special_ids().endoftext, 151643);
  EXPECT_EQ(tok.special_ids().im_start, 151644);
  EXPECT_EQ(tok.special_ids().im_end, 151645);
  EXPECT_EQ(tok.special_ids().eos, 151645);  // eos_token in tokenizer_config.json
  EXPECT_EQ(tok.special_ids().pad, 151643);
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(tok.token_id("Ġworld"), 1879);
  EXPECT_EQ(tok.token_id("<|im_end|>"), 151645);
  EXPECT_FALSE(tok.token_id("no such token at all").has_value());
  EXPECT_EQ(tok.token_text(1879), "Ġworld");
  EXPECT_EQ(tok.token_bytes(1879), " world");
  EXPECT_TRUE(tok.is_special(151645));
  EXPECT_FALSE(tok.is_special(151667));  // <think> is added but not special
  EXPECT_TRUE(tok.is_added(151667));
  EXPECT_FALSE(tok.is_added(1879));
  EXPECT_NE(tok.chat_template_source().find("<|im_start|>"), std::string::npos);
}

TEST(Tokenizer, SpecialTokensCanBeText) {
  const Tokenizer& tok = qwen3_tokenizer();
  std::vector<int32_t> with = tok.encode("a<|im_end|>b");
  std::vector<int32_t> without = tok.encode("a<|im_end|>b", /*allow_special=*/false);
  EXPECT_EQ(with.size(), 3u);
  EXPECT_EQ(with[1], 151645);
  EXPECT_GT(without.size(), 3u);
  EXPECT_EQ(std::count(without.begin(), without.end(), 151645), 0);
  EXPECT_EQ(tok.decode(without), "a<|im_end|>b");
  // <think> is not special: HF matches it even when special tokens are text.
  std::vector<int32_t> think = tok.encode("<think>", /*allow_special=*/false);
  EXPECT_EQ(think, (std::vector<int32_t>{151667}));
}

TEST(Tokenizer, DecodeSkipsSpecialTokensOnRequest) {
  const Tokenizer& tok = qwen3_tokenizer();
  std::vector<int32_t> ids = tok.encode("<|im_start|>assistant\nHi<think><|im_end|>");
  EXPECT_EQ(tok.decode(ids), "<|im_start|>assistant\nHi<think><|im_end|>");
  EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), "assistant\nHi<think>");
}

TEST(Tokenizer, BadInputIsAnError) {
  const Tokenizer& tok = qwen3_tokenizer();
  try {
    tok.encode("ok \xC3 bad");
    FAIL() << "invalid UTF-8 must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte 3"), std::string::npos) << e.what();
  }
  std::vector<int32_t> bad_ids = {1, 999999};
  EXPECT_THROW(tok.decode(bad_ids), Error);
  EXPECT_THROW(tok.decode(std::vector<int32_t>{-1}), Error);
  EXPECT_THROW(tok.token_text(151669), Error);
}

TEST(Tokenizer, EmptyAndWhitespace) {
  const Tokenizer& tok = qwen3_tokenizer();
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(tok.decode(std::vector<int32_t>{}), "");
  EXPECT_EQ(tok.decode(tok.encode("   \n\n\t ")), "   \n\n\t ");
}

TEST(Tokenizer, DigitsAreSplitOneByOne) {
  const Tokenizer& tok = qwen3_tokenizer();
  std::vector<int32_t> ids = tok.encode("1234567890");
  ASSERT_EQ(ids.size(), 10u);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(tok.token_bytes(ids[i]), std::string(1, "1234567890"[i]));
}

TEST(Tokenizer, WhitespaceClassIsOnigurumasNotPcre2s) {
  // U+180E is \s for PCRE2 but not for Oniguruma (HF): it must not be rewritten into the class.
  std::string rewritten = tokenizer::rewrite_whitespace_classes(R"(\s+(?!\S)|[^\s\p{L}])");
  EXPECT_EQ(rewritten.find("\\s"), std::string::npos);
  EXPECT_EQ(rewritten.find("\\S"), std::string::npos);
  EXPECT_EQ(rewritten.find("180E"), std::string::npos);
  EXPECT_NE(rewritten.find("\\x{85}"), std::string::npos);
  tokenizer::RegexSplitter splitter(tokenizer::kQwen2Pattern, "test");
  std::vector<tokenizer::Piece> pieces;
  splitter.split(
      "a\xE1\xA0\x8E"
      "b \xC2\x85 c",
      pieces);  // a U+180E b, space NEL space c
  std::vector<std::string> texts;
  std::string text =
      "a\xE1\xA0\x8E"
      "b \xC2\x85 c";
  for (auto p : pieces) texts.push_back(text.substr(p.begin, p.end - p.begin));
  EXPECT_EQ(texts, (std::vector<std::string>{"a",
                                             "\xE1\xA0\x8E"
                                             "b",
                                             " \xC2\x85", " c"}));
}

TEST(Tokenizer, ManyThreadsGetTheSameIds) {
  const Tokenizer& tok = qwen3_tokenizer();
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) texts.push_back("thread text " + std::to_string(i * 7919) + " 你好 🙂 words words");
  std::vector<std::vector<int32_t>> serial;
  for (const auto& t : texts) serial.push_back(tok.encode(t));
  std::vector<std::vector<int32_t>> parallel(texts.size());
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (size_t i = static_cast<size_t>(w); i < texts.size(); i += 4) parallel[i] = tok.encode(texts[i]);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(parallel, serial);
}

TEST(Tokenizer, OneMegabyteEncodesAndSplitsAtSpecialTokens) {
  // Corpus strings joined by <|endoftext|>: special tokens cut the text before any other step, so the ids
  // of the whole must be the ids of the parts with the separator id between them.
  const Tokenizer& tok = qwen3_tokenizer();
  auto rows = test::read_jsonl(test::fixture_path("tokenizer/corpus.jsonl"));
  std::string text;
  std::vector<int32_t> want;
  for (size_t i = 0; text.size() < (1u << 20); ++i) {
    std::string part = rows[i % rows.size()]["text"].get<std::string>();
    if (part.find("<|") != std::string::npos || part.find("<t") != std::string::npos) continue;
    text += part;
    std::vector<int32_t> ids = tok.encode(part);
    want.insert(want.end(), ids.begin(), ids.end());
    text += "<|endoftext|>";
    want.push_back(151643);
  }
  std::vector<int32_t> ids = tok.encode(text);
  EXPECT_EQ(ids, want);
  EXPECT_EQ(tok.decode(ids).size(), tok.decode(want).size());
}

// ---- a small hand-made tokenizer.json ----

json tiny_tokenizer_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[tokenizer::bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  vocab["Ġab"] = 258;
  json t;
  t["version"] = "1.0";
  t["added_tokens"] =
      json::array({json{{"id", 300},
                        {"content", "<|end|>"},
                        {"special", true},
                        {"lstrip", false},
                        {"rstrip", false},
                        {"single_word", false},
                        {"normalized", false}},
                   json{{"id", 301}, {"content", "[R]"}, {"special", false}, {"rstrip", true}, {"normalized", false}}});
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = json{
      {"type", "Sequence"},
      {"pretokenizers", json::array({json{{"type", "Split"},
                                          {"pattern", {{"Regex", std::string(tokenizer::kQwen2Pattern)}}},
                                          {"behavior", "Isolated"},
                                          {"invert", false}},
                                     json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  t["post_processor"] = nullptr;
  t["decoder"] = json{{"type", "ByteLevel"}};
  t["model"] = json{{"type", "BPE"},
                    {"dropout", nullptr},
                    {"unk_token", nullptr},
                    {"vocab", vocab},
                    {"merges", json::array({json::array({"a", "b"}), "ab c", json::array({"Ġ", "ab"})})}};
  return t;
}

TEST(TokenizerLoad, TinyTokenizerJson) {
  json config = {{"eos_token", "<|end|>"}, {"pad_token", {{"content", "<|end|>"}}}, {"chat_template", "x"}};
  Tokenizer tok = Tokenizer::from_json(tiny_tokenizer_json().dump(), config.dump(), "tiny");
  EXPECT_EQ(tok.vocab_size(), 302u);
  EXPECT_FALSE(tok.normalizes_nfc());
  EXPECT_EQ(tok.encode("abc ab abd"), (std::vector<int32_t>{257, 258, 258, 'd'}));
  EXPECT_EQ(tok.encode("x<|end|>y"), (std::vector<int32_t>{'x', 300, 'y'}));
  EXPECT_EQ(tok.special_ids().eos, 300);
  EXPECT_EQ(tok.special_ids().pad, 300);
  EXPECT_EQ(tok.special_ids().im_end, -1);
  EXPECT_EQ(tok.chat_template_source(), "x");
  // rstrip: the token swallows the whitespace after it.
  EXPECT_EQ(tok.encode("[R]   ab"), (std::vector<int32_t>{301, 256}));
  EncodedText enc = tok.encode_with_offsets("[R]   ab");
  EXPECT_EQ(enc.offsets[0], (std::pair<uint32_t, uint32_t>{0, 6}));
}

void expect_load_error(const json& t, const std::string& fragment) {
  try {
    Tokenizer::from_json(t.dump(), "", "bad.json");
    ADD_FAILURE() << "expected an error containing \"" << fragment << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
}

TEST(TokenizerLoad, BadFilesNameTheProblem) {
  expect_load_error(json::object(), "no \"model\"");
  json t = tiny_tokenizer_json();
  t["model"]["merges"].push_back(json::array({"q", "zz"}));
  expect_load_error(t, "model.merges[3]");
  t = tiny_tokenizer_json();
  t["normalizer"] = json{{"type", "NFKC"}};
  expect_load_error(t, "normalizer of type \"NFKC\"");
  t = tiny_tokenizer_json();
  t["model"]["vocab"]["neg"] = -5;
  expect_load_error(t, "has id -5");
  t = tiny_tokenizer_json();
  t["model"]["type"] = "Unigram";
  expect_load_error(t, "model type \"Unigram\"");
  t = tiny_tokenizer_json();
  t["post_processor"] = json{{"type", "TemplateProcessing"}};
  expect_load_error(t, "post_processor");
  t = tiny_tokenizer_json();
  t["model"]["vocab"].erase("Ġ");
  expect_load_error(t, "byte 0x20");
  try {
    Tokenizer::from_json("{\"model\": [1, 2", "", "broken.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: invalid JSON"), std::string::npos) << e.what();
  }
}

TEST(TokenizerFiles, FindsFilesInDirectoryOrBesideAFile) {
  test::TempDir dir;
  test::write_file(dir / "model.dat", "x");
  try {
    find_tokenizer_files(dir / "model.dat");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "tokenizer.json").string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--tokenizer"), std::string::npos) << e.what();
  }
  test::write_file(dir / "tokenizer.json", "{}");
  TokenizerFiles files = find_tokenizer_files(dir / "model.dat");
  EXPECT_EQ(files.tokenizer_json, dir / "tokenizer.json");
  EXPECT_TRUE(files.tokenizer_config_json.empty());
  test::write_file(dir / "tokenizer_config.json", "{}");
  files = find_tokenizer_files(dir.path());
  EXPECT_EQ(files.tokenizer_config_json, dir / "tokenizer_config.json");
  files = find_tokenizer_files(dir / "tokenizer.json");
  EXPECT_EQ(files.tokenizer_json, dir / "tokenizer.json");
  EXPECT_THROW(find_tokenizer_files(dir / "missing"), Error);
  Tokenizer bundled = Tokenizer::load(bundled_qwen3_tokenizer_dir() / "tokenizer.json");
  EXPECT_EQ(bundled.special_ids().eos, 151645);
}

}  // namespace
}  // namespace nvfp4lm::test_tokenizer_api
