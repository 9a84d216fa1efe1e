// The grammar matcher (infer/constrain/grammar_matcher.h): prefixes vs complete texts, JSON escapes and UTF-8,
// numbers, nesting, and the fewest tokens that still end a text (what keeps constrained answers in budget).
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "infer/constrain/grammar_matcher.h"
#include "infer/constrain/json_schema.h"

namespace nvfp4lm::test::test_constrain_matcher {
namespace {

using constrain::GrammarMatcher;
using nlohmann::json;

std::shared_ptr<const constrain::Grammar> schema(const char* text) {
  return constrain::json_schema_grammar(json::parse(text));
}

TEST(ConstrainMatcher, PrefixesCompleteAndClosed) {
  GrammarMatcher matcher(schema(R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})"));
  auto state = matcher.start();
  EXPECT_FALSE(matcher.complete(state));
  for (const char* prefix : {"{", "{\"", "{\"n", "{\"n\":", "{\"n\": 1", "{\"n\": 12"}) {
    EXPECT_NE(matcher.advance(matcher.start(), prefix), GrammarMatcher::kDead) << prefix;
    EXPECT_FALSE(matcher.complete(matcher.advance(matcher.start(), prefix))) << prefix;
  }
  EXPECT_EQ(matcher.advance(matcher.start(), "{\"m"), GrammarMatcher::kDead);
  EXPECT_EQ(matcher.advance(matcher.start(), "{\"n\":0"), matcher.advance(matcher.start(), "{\"n\":0"));
  state = matcher.advance(matcher.start(), "{\"n\":12}");
  EXPECT_TRUE(matcher.closed(state));
  EXPECT_EQ(matcher.min_tokens_to_end(state), 0);
  EXPECT_EQ(matcher.advance(state, ' '), GrammarMatcher::kDead);

  GrammarMatcher number(schema(R"({"type":"number"})"));
  const auto twelve = number.advance(number.start(), "12");
  EXPECT_TRUE(number.complete(twelve));
  EXPECT_FALSE(number.closed(twelve));  // "123" may follow: the end needs an end-of-sequence token
  EXPECT_EQ(number.min_tokens_to_end(twelve), 1);
  EXPECT_EQ(number.min_tokens_to_end(number.advance(number.start(), "1e")), 2);  // a digit, then the end
}

TEST(ConstrainMatcher, StringEscapesAndUtf8) {
  const auto strings = schema(R"({"type":"string"})");
  for (const char* text : {R"("\u0041\u00e9\u4e2d\ud83d\ude00")", "\"\xe4\xb8\xad\xf0\x9f\x98\x80\x7f\"", R"("\\\"")"})
    EXPECT_TRUE(constrain::grammar_matches(strings, text)) << text;
  // Prefixes stop where the text goes wrong: a split UTF-8 character is a prefix, a bad continuation is not.
  EXPECT_TRUE(constrain::grammar_accepts_prefix(strings, "\"\xf0\x9f"));
  EXPECT_FALSE(constrain::grammar_accepts_prefix(strings, "\"\xf0\x41"));
  EXPECT_FALSE(constrain::grammar_accepts_prefix(strings, "\"\xff"));
  EXPECT_FALSE(constrain::grammar_accepts_prefix(strings, "\"\xe0\x80"));  // overlong
  EXPECT_TRUE(constrain::grammar_accepts_prefix(strings, R"("\ud83d\u)"));
  EXPECT_FALSE(constrain::grammar_accepts_prefix(strings, R"("\ud83d\u0)"));  // a high surrogate needs a low one
  EXPECT_FALSE(constrain::grammar_accepts_prefix(strings, R"("\ud83d")"));
  EXPECT_FALSE(constrain::grammar_accepts_prefix(strings, "\"\x1f"));
  EXPECT_FALSE(constrain::grammar_accepts_prefix(strings, R"("\a)"));
}

TEST(ConstrainMatcher, NumbersWithExponents) {
  const auto numbers = schema(R"({"type":"number"})");
  for (const char* text : {"0", "-0", "0.5", "-12.25e+3", "1E9", "7e-08", "123456789012345.123456789012345"})
    EXPECT_TRUE(constrain::grammar_matches(numbers, text)) << text;
  for (const char* text : {"00", "-", "1.", "1e+", ".1", "1.5.2", "--1", "1e1.5", "Infinity", "NaN"})
    EXPECT_FALSE(constrain::grammar_matches(numbers, text)) << text;
}

TEST(ConstrainMatcher, NestedAnyJson) {
  const auto objects = constrain::json_object_grammar();
  EXPECT_TRUE(constrain::grammar_matches(objects, R"({"a":{"b":[1,[2,[3,{"c":null}]],"x"]},"d":true})"));
  EXPECT_FALSE(constrain::grammar_matches(objects, R"({"a":{"b":[1,[2,[3,{"c":null}]],"x"]},"d":true)"));
  EXPECT_FALSE(constrain::grammar_matches(objects, R"({"a":[1,2}})"));
  EXPECT_FALSE(constrain::grammar_matches(objects, R"([1])"));
  // The fewest tokens to the end count every bracket still open.
  GrammarMatcher matcher(objects);
  EXPECT_EQ(matcher.min_tokens_to_end(matcher.start()), 2);
  EXPECT_EQ(matcher.min_tokens_to_end(matcher.advance(matcher.start(), R"({"a":[[{"b":)")), 5);  // 0}]]}
}

TEST(ConstrainMatcher, CompactKeepsTheCurrentState) {
  GrammarMatcher matcher(constrain::json_object_grammar());
  auto state = matcher.advance(matcher.start(), R"({"key": [1, "t)");
  ASSERT_GT(matcher.state_count(), 4u);
  state = matcher.compact(state, 1);
  EXPECT_LE(matcher.state_count(), 2u);
  EXPECT_TRUE(matcher.closed(matcher.advance(state, R"(ext"]})")));
}

}  // namespace
}  // namespace nvfp4lm::test::test_constrain_matcher
