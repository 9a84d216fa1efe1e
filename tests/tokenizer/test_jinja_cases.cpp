// The Jinja interpreter against Python's jinja2 as transformers configures it: every case of
// tests/fixtures/tokenizer/jinja_cases.jsonl (written by tests/reference/make_jinja_fixtures.py) renders to the
// same text, and the cases jinja2 refuses are refused here too, with a one-line message.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "tokenizer/jinja/template.h"
#include "tokenizer_test_util.h"

namespace nvfp4lm::test_jinja_cases {
namespace {

using json = nlohmann::ordered_json;

TEST(JinjaCases, MatchPythonJinja2) {
  std::ifstream in(test::fixture_path("tokenizer/jinja_cases.jsonl"), std::ios::binary);
  ASSERT_TRUE(in.good());
  std::string line;
  size_t cases = 0;
  while (std::getline(in, line)) {
    const json row = json::parse(line);
    if (row.contains("meta")) {
      ASSERT_EQ(row["meta"]["source"], "jinja2") << "jinja_cases.jsonl was not written by jinja2";
      continue;
    }
    ++cases;
    const std::string source = row["template"];
    std::string rendered, error;
    try {
      rendered = jinja::Template(source).render(row["context"]);
    } catch (const Error& e) {
      error = e.what();
    }
    if (row.contains("text")) {
      EXPECT_EQ(error, "") << "template: " << source;
      EXPECT_EQ(rendered, row["text"].get<std::string>()) << "template: " << source;
    } else {
      EXPECT_NE(error, "") << "jinja2 refuses this template, the interpreter rendered " << rendered
                           << "\ntemplate: " << source;
      EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    }
  }
  EXPECT_GE(cases, 100u);
}

}  // namespace
}  // namespace nvfp4lm::test_jinja_cases
