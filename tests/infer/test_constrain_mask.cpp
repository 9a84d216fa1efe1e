// The allowed-token mask (infer/constrain/grammar_constraint.h): equal to a brute-force check of every token on
// small random vocabularies, right on the real Qwen3 vocabulary at typical states, and keeping answers inside
// their token budget: random logits at temperature 1 with a tiny max_tokens always end in a complete value.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "core/rng.h"
#include "infer/constrain/grammar_constraint.h"
#include "infer/constrain/json_schema.h"
#include "infer/infer_test_util.h"
#include "infer/sampler.h"

namespace nvfp4lm::test::test_constrain_mask {
namespace {

using constrain::GrammarConstraint;
using constrain::GrammarMatcher;
using constrain::TokenTrie;
using nlohmann::json;

constexpr const char* kPersonSchema = R"({"type":"object","properties":{
  "name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150},
  "tags":{"type":"array","items":{"enum":["a","bc"]},"maxItems":3},"score":{"type":["number","null"]}},
  "required":["name","age"]})";

bool bit(const std::vector<uint64_t>& bits, size_t id) { return (bits[id >> 6] >> (id & 63)) & 1; }

// Random tokens over JSON's bytes and some UTF-8, 1 to 4 bytes each; every single byte of the alphabet is a token
// (as in byte-level BPE).
std::vector<std::string> random_vocabulary(Rng& rng, size_t count) {
  const std::string alphabet = "{}[]\":, \n0123456789.-+eEabcdefghijklmnopqrstuvwxyz\\/";
  std::vector<std::string> pieces;
  for (char c : alphabet) pieces.emplace_back(1, c);
  for (const char* multi : {"\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xc3", "\xa9"}) pieces.emplace_back(multi);
  std::vector<std::string> vocabulary = pieces;
  while (vocabulary.size() < count) {
    std::string token;
    const int parts = 1 + static_cast<int>(rng.next_u64() % 4);
    for (int i = 0; i < parts; ++i) token += pieces[rng.next_u64() % pieces.size()];
    vocabulary.push_back(token);
  }
  vocabulary.push_back("");  // an id that may not be generated (a special token)
  return vocabulary;
}

TEST(ConstrainMask, EqualsBruteForceOnRandomVocabularies) {
  Rng rng(7);
  const std::vector<const char*> schemas = {kPersonSchema, R"({"type":"object"})",
                                            R"({"type":"array","items":{"type":"number"},"minItems":1})"};
  for (const char* schema_text : schemas) {
    const auto grammar = constrain::json_schema_grammar(json::parse(schema_text));
    const std::vector<std::string> vocabulary = random_vocabulary(rng, 400);
    const auto trie = std::make_shared<const TokenTrie>(vocabulary);
    const int32_t eos = static_cast<int32_t>(vocabulary.size() - 1);
    for (int run = 0; run < 8; ++run) {
      GrammarConstraint constraint(grammar, trie, {eos});
      GrammarMatcher reference(grammar);
      auto state = reference.start();
      int64_t budget = constrain::min_tokens(*grammar) + static_cast<int64_t>(rng.next_u64() % 30);
      for (; budget > 0; --budget) {
        const std::vector<uint64_t> bits = constraint.allowed_tokens(budget);
        std::vector<int32_t> allowed;
        for (size_t id = 0; id < vocabulary.size(); ++id) {
          bool expected;
          if (static_cast<int32_t>(id) == eos) {
            expected = reference.complete(state);
          } else {
            const auto next = reference.advance(state, vocabulary[id]);
            expected = !vocabulary[id].empty() && next != GrammarMatcher::kDead &&
                       reference.min_tokens_to_end(next) <= budget - 1;
          }
          ASSERT_EQ(bit(bits, id), expected) << schema_text << ": token '" << vocabulary[id] << "' budget " << budget;
          if (expected) allowed.push_back(static_cast<int32_t>(id));
        }
        ASSERT_FALSE(allowed.empty()) << "no token allowed with budget " << budget;
        const int32_t token = allowed[rng.next_u64() % allowed.size()];
        ASSERT_TRUE(constraint.accept(token));
        if (token == eos || constraint.closed()) break;
        state = reference.advance(state, vocabulary[static_cast<size_t>(token)]);
      }
      EXPECT_TRUE(constraint.complete()) << schema_text;
    }
  }
}

const std::shared_ptr<const TokenTrie>& qwen3_trie() {
  static const std::shared_ptr<const TokenTrie> trie = TokenTrie::from_tokenizer(qwen3_tokenizer());
  return trie;
}

int32_t id_of(const std::string& text) {
  const auto ids = qwen3_tokenizer().encode(text);
  EXPECT_EQ(ids.size(), 1u) << text;
  return ids.at(0);
}

TEST(ConstrainMask, Qwen3VocabularySpotChecks) {
  const Tokenizer& tokenizer = qwen3_tokenizer();
  const SpecialTokenIds& special = tokenizer.special_ids();
  const std::vector<int32_t> eos = {special.im_end, special.endoftext};
  GrammarConstraint constraint(constrain::json_schema_grammar(json::parse(kPersonSchema)), qwen3_trie(), eos);
  constexpr int64_t kPlenty = 1000;
  auto allowed = [&](const std::string& text) { return constraint.allowed(id_of(text), kPlenty); };
  auto push = [&](const std::string& text) {
    for (int32_t id : tokenizer.encode(text)) ASSERT_TRUE(constraint.accept(id)) << text;
  };
  EXPECT_TRUE(allowed("{\""));
  EXPECT_TRUE(allowed("{"));
  EXPECT_FALSE(allowed("["));
  EXPECT_FALSE(allowed(" {"));
  EXPECT_FALSE(constraint.allowed(special.im_end, kPlenty));
  EXPECT_FALSE(constraint.allowed(special.im_start, kPlenty));
  push("{\"");
  EXPECT_TRUE(allowed("age"));
  EXPECT_FALSE(allowed("name"));  // properties in schema order (json::parse sorted them), and "age" is required
  EXPECT_FALSE(allowed("score"));
  push("age\": ");
  EXPECT_TRUE(allowed("1"));  // Qwen3 writes numbers digit by digit
  EXPECT_FALSE(allowed("-"));
  push("15");
  EXPECT_FALSE(allowed("1"));  // 151 is above the maximum
  EXPECT_TRUE(allowed("0"));
  EXPECT_TRUE(allowed(","));
  EXPECT_FALSE(allowed("\""));
  push(", \"name\": \"");
  EXPECT_TRUE(allowed("Ada"));
  EXPECT_TRUE(allowed("\","));
  EXPECT_TRUE(allowed("\"}"));
  EXPECT_FALSE(allowed("\"]"));
  EXPECT_FALSE(allowed("\n"));  // control characters need an escape
  EXPECT_FALSE(constraint.allowed(special.im_start, kPlenty));
  push("Ada Lovelace");  // 12 characters: the maximum
  EXPECT_FALSE(allowed("a"));
  EXPECT_TRUE(allowed("\""));
  push("\"}");
  EXPECT_TRUE(constraint.closed());
  EXPECT_TRUE(constraint.complete());
}

TEST(ConstrainMask, EndOfSequenceOnlyWhenComplete) {
  const Tokenizer& tokenizer = qwen3_tokenizer();
  const int32_t im_end = tokenizer.special_ids().im_end;
  GrammarConstraint constraint(constrain::json_schema_grammar(json::parse(R"({"type":"integer"})")), qwen3_trie(),
                               {im_end});
  EXPECT_FALSE(constraint.allowed(im_end, 100));
  ASSERT_TRUE(constraint.accept(id_of("1")));
  ASSERT_TRUE(constraint.accept(id_of("2")));
  EXPECT_TRUE(constraint.allowed(im_end, 100));
  EXPECT_TRUE(constraint.allowed(id_of("3"), 100));
  EXPECT_FALSE(constraint.allowed(id_of("3"), 1));  // the last token: only the end may come
  EXPECT_TRUE(constraint.allowed(im_end, 1));
  EXPECT_FALSE(constraint.closed());
  ASSERT_TRUE(constraint.accept(im_end));
  EXPECT_TRUE(constraint.closed());
}

// Temperature 1 over random logits (a random model) with little budget: every answer still parses and matches.
TEST(ConstrainMask, TightBudgetsAlwaysEndInAValidValue) {
  const Tokenizer& tokenizer = qwen3_tokenizer();
  const std::vector<int32_t> eos = {tokenizer.special_ids().im_end};
  const auto grammar = constrain::json_schema_grammar(json::parse(kPersonSchema));
  const int32_t minimum = constrain::min_tokens(*grammar);
  EXPECT_EQ(minimum, static_cast<int32_t>(std::string(R"({"age":0,"name":""})").size()));
  Rng rng(11);
  SamplingOptions options;
  options.temperature = 1.0f;
  options.top_k = 0;
  options.top_p = 1.0f;
  std::vector<float> logits(tokenizer.vocab_size());
  for (int run = 0; run < 12; ++run) {
    options.seed = static_cast<uint64_t>(run);
    Sampler sampler(options);
    GrammarConstraint constraint(grammar, qwen3_trie(), eos);
    const int64_t max_tokens = minimum + run * 3;
    std::vector<int32_t> tokens;
    for (int64_t used = 0; used < max_tokens && !constraint.closed(); ++used) {
      for (float& logit : logits) logit = 4.0f * (rng.uniform() - 0.5f);
      constraint.mask_logits(logits, max_tokens - used);
      const int32_t token = sampler.sample(logits);
      ASSERT_TRUE(constraint.accept(token)) << tokenizer.decode(tokens);
      tokens.push_back(token);
    }
    ASSERT_TRUE(constraint.complete()) << "budget " << max_tokens << ": " << tokenizer.decode(tokens);
    std::vector<int32_t> text_tokens;
    for (int32_t token : tokens)
      if (token != eos[0]) text_tokens.push_back(token);
    const std::string text = tokenizer.decode(text_tokens);
    EXPECT_TRUE(constrain::grammar_matches(grammar, text)) << text;
    const json value = json::parse(text);  // throws when it does not parse
    EXPECT_TRUE(value.contains("name") && value.contains("age")) << text;
    EXPECT_LE(static_cast<int64_t>(tokens.size()), max_tokens);
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_constrain_mask
