// JSON Schema -> grammar (infer/constrain/json_schema.h): for each supported keyword, texts the grammar must take
// and texts it must refuse; unsupported keywords are one-line Errors naming the keyword and where it is.
#include <gtest/gtest.h>

#include <chrono>

#include "common/test_util.h"
#include "infer/constrain/grammar_matcher.h"
#include "infer/constrain/json_schema.h"

namespace nvfp4lm::test::test_constrain_schema {
namespace {

using constrain::grammar_matches;
using constrain::json_schema_grammar;
using nlohmann::json;

struct Case {
  const char* schema;
  std::vector<std::string> accepted;
  std::vector<std::string> refused;
};

void check(const Case& c, int max_whitespace = 1) {
  const auto grammar = json_schema_grammar(json::parse(c.schema), {max_whitespace});
  for (const auto& text : c.accepted)
    EXPECT_TRUE(grammar_matches(grammar, text)) << c.schema << " should take " << text;
  for (const auto& text : c.refused)
    EXPECT_FALSE(grammar_matches(grammar, text)) << c.schema << " should refuse " << text;
}

TEST(ConstrainSchema, Object) {
  check({R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a","b"],
             "additionalProperties":false})",
         {R"({"a":1,"b":"x"})", R"({ "a": 1, "b": "x" })", "{\"a\":1,\n\"b\":\"\"}"},
         {R"({"a":1})", R"({"b":"x","a":1})", R"({"a":1,"b":"x","c":2})", R"({"a":"1","b":"x"})", R"({"a":1,"b":"x"} )",
          R"({  "a":1,"b":"x"})", R"({"a":1,,"b":"x"})", R"({"a":1,"b":"x",})"}});
  // Optional properties may be left out, in any combination; the order is the schema's (json::parse sorts keys, so
  // here the names' order).
  check({R"({"type":"object","properties":{"a":{"type":"null"},"b":{"type":"null"},"c":{"type":"null"}},
             "required":["b"]})",
         {R"({"b":null})", R"({"a":null,"b":null})", R"({"b":null,"c":null})", R"({"a":null,"b":null,"c":null})"},
         {"{}", R"({"a":null})", R"({"a":null,"c":null})", R"({"b":null,"d":null})"}});
  // No properties declared: any members (JSON Schema's default); additionalProperties true: extra keys after the
  // declared ones, never a declared name again.
  check({R"({"type":"object"})", {"{}", R"({"x":[1,{"y":null}],"z":"w"})"}, {"[]", R"({"x"})"}});
  check({R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":true})",
         {R"({"id":1})", R"({"id":1,"note":"x"})", R"({"id":1,"i":2,"idx":3})"},
         {R"({"id":1,"id":"x"})", R"({"note":"x"})"}});
  check(
      {R"({"type":"object","additionalProperties":{"type":"boolean"}})", {R"({"k":true,"l":false})"}, {R"({"k":1})"}});
  check({R"({"properties":{"a":{"const":1}},"required":["a"]})", {R"({"a":1})"}, {R"({"a":2})", "1"}});
}

TEST(ConstrainSchema, Array) {
  check({R"({"type":"array","items":{"type":"boolean"}})",
         {"[]", "[true]", "[true, false]", "[ true,false ]"},
         {"[1]", "[true,]", "[,]", "["}});
  check({R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
         {"[1,2]", "[1,2,3]"},
         {"[]", "[1]", "[1,2,3,4]"}});
  check({R"({"type":"array","minItems":1})", {R"([1,"a",{}])", "[null]"}, {"[]"}});
  check({R"({"type":"array","maxItems":0})", {"[]"}, {"[1]"}});
}

TEST(ConstrainSchema, String) {
  check({R"({"type":"string"})",
         {R"("")", R"("abc")", R"("\"\\\/\b\f\n\r\t")", R"("\u00e9\uD83D\uDE00")", "\"caf\xc3\xa9 \xf0\x9f\x98\x80\""},
         {R"(")", R"("a)", "\"a\nb\"", R"("\x")", R"("\u12")", R"("\uD83D")", R"("\uDE00")", "\"\xc3\"", "\"\xc0\xaf\"",
          "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "abc"}});
  check({R"({"type":"string","minLength":2,"maxLength":3})",
         {R"("ab")", R"("abc")", "\"\xc3\xa9\xc3\xa9\"", R"("\n\t")"},
         {R"("a")", R"("abcd")", "\"\xc3\xa9\""}});
  check({R"({"type":"string","enum":["red","green"]})", {R"("red")", R"("green")"}, {R"("blue")", "red"}});
  check({R"({"const":"x"})", {R"("x")"}, {R"("y")"}});
}

TEST(ConstrainSchema, Numbers) {
  check(
      {R"({"type":"integer"})", {"0", "-7", "123456789012345"}, {"01", "-0", "1.5", "1e3", "1234567890123456", "+1"}});
  check({R"({"type":"integer","minimum":-5,"maximum":120})",
         {"-5", "-1", "0", "9", "10", "99", "100", "120"},
         {"-6", "121", "130", "200", "-10"}});
  check({R"({"type":"integer","exclusiveMinimum":10,"exclusiveMaximum":13})", {"11", "12"}, {"10", "13"}});
  check({R"({"type":"integer","minimum":-20,"maximum":-3})", {"-3", "-20", "-15"}, {"-2", "0", "-21", "3"}});
  check(
      {R"({"type":"number"})", {"0", "-1.5", "2e10", "3.25E-2", "1e+5", "-0.0"}, {"1.", ".5", "1e", "01.5", "1e123"}});
}

TEST(ConstrainSchema, LiteralsEnumsAnyOfAndTypeLists) {
  check({R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}});
  check({R"({"type":"null"})", {"null"}, {"nul", "\"null\""}});
  check({R"({"enum":[1,"a",null,[1,2],{"k":true}]})",
         {"1", R"("a")", "null", "[1,2]", R"({"k":true})"},
         {"2", "[1, 2]"}});
  // An enum value the type excludes is left out.
  check({R"({"type":"integer","enum":[1,"1",2.5,3]})", {"1", "3"}, {R"("1")", "2.5"}});
  check({R"({"type":["string","null"],"maxLength":1})", {R"("a")", "null"}, {R"("ab")", "1"}});
  check({R"({"anyOf":[{"type":"integer"},{"type":"object","properties":{"x":{"type":"null"}},"required":["x"]}]})",
         {"5", R"({"x":null})"},
         {R"({})", R"("5")"}});
  check({R"({})", {"1", R"({"a":[]})", "null"}, {"", "nul"}});
  check({"true", {"[]"}, {"]"}});
}

TEST(ConstrainSchema, References) {
  check({R"({"$defs":{"id":{"type":"integer","minimum":0}},"type":"object",
             "properties":{"x":{"$ref":"#/$defs/id"}},"required":["x"]})",
         {R"({"x":3})"},
         {R"({"x":-3})"}});
  // Recursive: a tree of nodes.
  check({R"({"definitions":{"node":{"type":"object","properties":{"v":{"type":"integer"},
             "kids":{"type":"array","items":{"$ref":"#/definitions/node"}}},"required":["v","kids"]}},
             "$ref":"#/definitions/node"})",
         {R"({"kids":[],"v":1})", R"({"kids":[{"kids":[{"kids":[],"v":3}],"v":2}],"v":1})"},
         {R"({"kids":[{}],"v":1})"}});
  check({R"({"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["next"]})",
         {R"({"next":null})", R"({"next":{"next":null}})"},
         {R"({"next":{}})"}});
}

TEST(ConstrainSchema, Whitespace) {
  const auto compact = json_schema_grammar(json::parse(R"({"type":"array","items":{"type":"integer"}})"), {0});
  EXPECT_TRUE(grammar_matches(compact, "[1,2]"));
  EXPECT_FALSE(grammar_matches(compact, "[1, 2]"));
  const auto loose = json_schema_grammar(json::parse(R"({"type":"array","items":{"type":"integer"}})"), {2});
  EXPECT_TRUE(grammar_matches(loose, "[\n 1,\t2 ]"));
  EXPECT_FALSE(grammar_matches(loose, "[   1]"));
}

TEST(ConstrainSchema, UnsupportedKeywordsAreErrorsNamingKeywordAndPath) {
  auto refused = [](const char* schema, std::initializer_list<std::string> parts) {
    expect_error([&] { json_schema_grammar(json::parse(schema)); }, parts);
  };
  refused(R"({"type":"object","properties":{"zip":{"type":"string","pattern":"^[0-9]+$"}}})",
          {"'pattern'", "$.properties.zip"});
  refused(R"({"type":"string","format":"date-time"})", {"'format'", "$"});
  refused(R"({"oneOf":[{"type":"integer"}]})", {"'oneOf'", "anyOf"});
  refused(R"({"allOf":[{"type":"integer"}]})", {"'allOf'"});
  refused(R"({"type":"number","minimum":0})", {"'minimum'", "integers only"});
  refused(R"({"type":"array","items":{"type":"integer","multipleOf":2}})", {"'multipleOf'", "$.items"});
  refused(R"({"type":"array","uniqueItems":true})", {"'uniqueItems'"});
  refused(R"({"type":"object","properties":{"a b":{"not":{}}}})", {"'not'", R"($.properties["a b"])"});
  refused(R"({"$ref":"#/$defs/missing"})", {"'$ref'", "#/$defs/missing"});
  refused(R"({"$ref":"http://example.com/s.json"})", {"'$ref'"});
  refused("false", {"false"});
  refused(R"({"type":"date"})", {"'type'"});
  refused(R"({"type":"string","enum":[1,2]})", {"'enum'", "no value"});
  refused(R"({"type":"integer","minimum":5,"maximum":4})", {"no integer"});
  refused(R"({"type":"string","maxLength":100000})", {"'maxLength'", "8192"});
  refused(R"({"type":"object","properties":{"a":{}},"required":["b"]})", {"'required'", "'b'"});
  refused(R"({"anyOf":[{"type":"integer"}],"type":"integer"})", {"'type'", "anyOf"});
  refused(R"({"type":"object","properties":{"r":{"$ref":"#/properties/r"}}})", {"no finite text"});
  refused(R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})", {"left-recursive"});
  // Issue 53 item 6: a schema whose shortest answer passes 2 GiB was reported as a rule that "only recurses".
  expect_error(
      [&] {
        json_schema_grammar(json::parse(R"({"type":"array","minItems":1024,"items":{"type":"array","minItems":1024,
            "items":{"type":"string","minLength":8192}}})"));
      },
      {"shorter than 2 GiB"});
}

TEST(ConstrainSchema, MinimalLengthAndEndToken) {
  const auto object = json_schema_grammar(
      json::parse(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]})"));
  EXPECT_EQ(object->min_bytes(), static_cast<int32_t>(std::string(R"({"a":0})").size()));
  EXPECT_FALSE(object->needs_end_token());
  const auto integer = json_schema_grammar(json::parse(R"({"type":"integer","minimum":100})"));
  EXPECT_EQ(integer->min_bytes(), 3);
  EXPECT_TRUE(integer->needs_end_token());
  EXPECT_EQ(constrain::json_object_grammar()->min_bytes(), 2);
}

// Issue 52: N optional properties compile in about linear time (the minimal lengths' fixed point took one pass per
// link of their chain: 20,000 properties took 36 s), their minimal lengths are still right (the required one's
// member), and a grammar past kMaxGrammarSymbols is an error, not gigabytes.
TEST(ConstrainSchema, ManyOptionalPropertiesCompileFastAndGrammarsAreBounded) {
  nlohmann::ordered_json properties = nlohmann::ordered_json::object();
  for (int i = 0; i < 5000; ++i) properties["p" + std::to_string(i)] = {{"type", "integer"}};
  nlohmann::ordered_json schema = {{"type", "object"}, {"properties", properties}, {"required", {"p4999"}}};
  const auto start = std::chrono::steady_clock::now();
  const auto grammar = json_schema_grammar(schema);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 2.0 * emulated_time_factor());
  EXPECT_EQ(grammar->min_bytes(), static_cast<int32_t>(std::string(R"({"p4999":0})").size()));
  EXPECT_TRUE(grammar_matches(grammar, R"({"p0":1,"p4999":2})"));
  EXPECT_FALSE(grammar_matches(grammar, R"({"p0":1})"));
  EXPECT_GT(grammar->memory_bytes(), grammar->rule_count() * sizeof(std::string));

  const auto wide =
      nlohmann::ordered_json{{"type", "string"}, {"enum", {std::string(constrain::kMaxGrammarSymbols, 'x')}}};
  expect_error([&] { json_schema_grammar(wide); }, {"symbols, more than the", "a smaller schema"});
}

TEST(ConstrainSchema, PropertiesComeInTheOrderTheSchemaDeclaresThem) {
  const auto grammar = json_schema_grammar(nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},"required":["alpha"]})"));
  EXPECT_TRUE(grammar_matches(grammar, R"({"zeta":1,"alpha":2})"));
  EXPECT_TRUE(grammar_matches(grammar, R"({"alpha":2})"));
  EXPECT_FALSE(grammar_matches(grammar, R"({"alpha":2,"zeta":1})"));
}

TEST(ConstrainSchema, FramedAlternatives) {
  const std::vector<constrain::FramedSchema> tools = {
      {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
       json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"),
       "}\n</tool_call>"},
      {"<tool_call>\n{\"name\": \"now\", \"arguments\": ", json::parse(R"({"type":"object","properties":{}})"),
       "}\n</tool_call>"}};
  const auto grammar = constrain::framed_json_grammar(tools);
  EXPECT_TRUE(grammar_matches(
      grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
  EXPECT_TRUE(grammar_matches(grammar, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(
      grammar_matches(grammar, "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"city\": \"P\"}}\n</tool_call>"));
  EXPECT_FALSE(grammar_matches(grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(grammar->needs_end_token());
  expect_error(
      [&] {
        constrain::framed_json_grammar(std::vector<constrain::FramedSchema>{
            {"", json::object(), ""}, {"", json::parse(R"({"type":"string","pattern":"x"})"), ""}});
      },
      {"'pattern'", "$[1]"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_constrain_schema
