// Exactness against HF tokenizers: every string of tests/fixtures/tokenizer/corpus.jsonl must encode to the
// ids in expected.jsonl (written by tests/reference/make_tokenizer_fixtures.py with HF `tokenizers`), with
// and without special-token matching, and decode to HF's decode output. Also round trips: decode(encode(s))
// is s for NFC input (NFC(s) otherwise), offsets tile the input, and streaming decode equals decode.
#include <gtest/gtest.h>

#include <map>

#include "tokenizer/nfc.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace nvfp4lm::test_corpus {
namespace {

using test::fixture_path;
using test::ids_of;
using test::qwen3_tokenizer;
using test::read_jsonl;

struct CorpusCase {
  int64_t id;
  std::string category;
  std::string text;
  nlohmann::json expected;
};

const std::vector<CorpusCase>& corpus() {
  static const std::vector<CorpusCase> cases = [] {
    std::vector<CorpusCase> out;
    auto corpus_rows = read_jsonl(fixture_path("tokenizer/corpus.jsonl"));
    auto expected_rows = read_jsonl(fixture_path("tokenizer/expected.jsonl"));
    std::map<int64_t, nlohmann::json> expected_by_id;
    for (const auto& row : expected_rows) {
      if (row.contains("meta")) continue;
      expected_by_id[row["id"].get<int64_t>()] = row;
    }
    for (const auto& row : corpus_rows) {
      CorpusCase c{row["id"].get<int64_t>(), row["category"].get<std::string>(), row["text"].get<std::string>(), {}};
      auto it = expected_by_id.find(c.id);
      if (it != expected_by_id.end()) c.expected = it->second;
      out.push_back(std::move(c));
    }
    return out;
  }();
  return cases;
}

std::string show(const std::vector<int32_t>& ids) { return nlohmann::json(ids).dump(); }

TEST(TokenizerCorpus, FixturesAreFromHfAndCurrent) {
  auto expected_rows = read_jsonl(fixture_path("tokenizer/expected.jsonl"));
  ASSERT_FALSE(expected_rows.empty());
  ASSERT_TRUE(expected_rows[0].contains("meta"));
  // "hf" = written by HF tokenizers; anything else (e.g. a JS port) is provisional and reported here.
  EXPECT_EQ(expected_rows[0]["meta"]["source"], "hf") << "expected.jsonl is provisional: " << expected_rows[0]["meta"];
  ASSERT_GE(corpus().size(), 300u);
  for (const CorpusCase& c : corpus()) {
    ASSERT_FALSE(c.expected.is_null()) << "corpus string " << c.id
                                       << " has no expected ids: re-run make_tokenizer_fixtures.py";
    ASSERT_EQ(c.expected["text"].get<std::string>(), c.text) << "expected.jsonl is stale for corpus string " << c.id
                                                             << ": re-run tests/reference/make_tokenizer_fixtures.py";
  }
}

TEST(TokenizerCorpus, IdsMatchHfExactly) {
  const Tokenizer& tok = qwen3_tokenizer();
  size_t mismatches = 0;
  for (const CorpusCase& c : corpus()) {
    if (c.expected.is_null()) continue;
    std::vector<int32_t> ids = tok.encode(c.text);
    std::vector<int32_t> want = ids_of(c.expected["ids"]);
    if (ids != want) {
      ++mismatches;
      ADD_FAILURE() << "corpus " << c.id << " (" << c.category << ") " << nlohmann::json(c.text).dump() << "\n  got  "
                    << show(ids) << "\n  want " << show(want);
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(TokenizerCorpus, IdsWithSpecialTokensAsTextMatchHf) {
  const Tokenizer& tok = qwen3_tokenizer();
  for (const CorpusCase& c : corpus()) {
    if (c.expected.is_null()) continue;
    EXPECT_EQ(tok.encode(c.text, /*allow_special=*/false), ids_of(c.expected["ids_no_special"]))
        << "corpus " << c.id << " " << nlohmann::json(c.text).dump();
  }
}

TEST(TokenizerCorpus, DecodeMatchesHfAndRoundTrips) {
  const Tokenizer& tok = qwen3_tokenizer();
  for (const CorpusCase& c : corpus()) {
    if (c.expected.is_null()) continue;
    std::vector<int32_t> ids = ids_of(c.expected["ids"]);
    std::string decoded = tok.decode(ids);
    EXPECT_EQ(decoded, c.expected["decoded"].get<std::string>()) << "corpus " << c.id;
    EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), c.expected["decoded_skip_special"].get<std::string>())
        << "corpus " << c.id;
    // Byte-level BPE is lossless up to the NFC normaliser.
    EXPECT_EQ(decoded, tokenizer::nfc(c.text)) << "corpus " << c.id;
    if (tokenizer::nfc(c.text) == c.text) {
      EXPECT_EQ(tok.decode(tok.encode(c.text)), c.text) << "corpus " << c.id;
    }
  }
}

TEST(TokenizerCorpus, OffsetsTileTheInputAndIdsAgree) {
  const Tokenizer& tok = qwen3_tokenizer();
  for (const CorpusCase& c : corpus()) {
    EncodedText enc = tok.encode_with_offsets(c.text);
    ASSERT_EQ(enc.ids, tok.encode(c.text)) << "corpus " << c.id;
    ASSERT_EQ(enc.offsets.size(), enc.ids.size());
    uint32_t covered = 0, previous_begin = 0;
    for (size_t i = 0; i < enc.ids.size(); ++i) {
      auto [begin, end] = enc.offsets[i];
      ASSERT_LT(begin, end) << "corpus " << c.id << " token " << i;
      ASSERT_LE(end, c.text.size());
      // No gaps, never backwards (tokens inside one run that NFC changed share that run's span).
      ASSERT_LE(begin, covered) << "corpus " << c.id << " token " << i;
      ASSERT_GE(begin, previous_begin) << "corpus " << c.id << " token " << i;
      previous_begin = begin;
      covered = std::max(covered, end);
      // Where the text is unchanged by NFC, a token's span is exactly its bytes.
      if (!tok.is_added(enc.ids[i]) && tokenizer::nfc(c.text) == c.text) {
        ASSERT_EQ(c.text.substr(begin, end - begin), tok.token_bytes(enc.ids[i]))
            << "corpus " << c.id << " token " << i;
      }
    }
    EXPECT_EQ(covered, c.text.size()) << "corpus " << c.id;
  }
}

TEST(TokenizerCorpus, StreamingDecodeEqualsDecode) {
  const Tokenizer& tok = qwen3_tokenizer();
  for (bool skip : {false, true}) {
    for (const CorpusCase& c : corpus()) {
      std::vector<int32_t> ids = tok.encode(c.text);
      StreamingDecoder stream(tok, skip);
      std::string streamed;
      for (int32_t id : ids) {
        std::string piece = stream.push(id);
        ASSERT_TRUE(tokenizer::is_valid_utf8(piece)) << "corpus " << c.id;
        streamed += piece;
      }
      streamed += stream.finish();
      EXPECT_EQ(streamed, tok.decode(ids, skip)) << "corpus " << c.id;
    }
  }
}

}  // namespace
}  // namespace nvfp4lm::test_corpus
