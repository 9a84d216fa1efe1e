// Bad dataset files: every problem is an Error that names the file, the line (or entry) and what was wrong.
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/dataset.h"
#include "tokenizer/tokenizer_test_util.h"

namespace nvfp4lm::test_errors {
namespace {

struct BadCase {
  std::string file_name;
  std::string content;
  std::string place;                  // "line N" / "entry N" expected in the message ("" for file-level errors)
  std::vector<std::string> mentions;  // further parts the message must contain
};

const std::string kGood = R"({"prompt": "p", "completion": "c"})";

std::vector<BadCase> bad_cases() {
  return {
      {"a.jsonl", kGood + "\n{\"prompt\": \"p\", \"completion\": }\n", "line 2", {"bad JSON", "at column 31"}},
      {"a.jsonl", kGood + "\n\n[1, 2]\n", "line 3", {"expected a JSON object", "array"}},
      {"a.jsonl", kGood + "\n{\"conversation\": []}\n", "line 2", {"missing \"messages\"", "\"conversation\""}},
      {"a.jsonl", "{\"messages\": {\"role\": \"user\"}}\n", "line 1", {"messages is object"}},
      {"a.jsonl", "{\"messages\": [\"hi\"]}\n", "line 1", {"messages[0] is string"}},
      {"a.jsonl", "{\"messages\": [{\"content\": \"hi\"}]}\n", "line 1", {"messages[0].role", "is missing"}},
      {"a.jsonl", "{\"messages\": [{\"role\": \"user\"}]}\n", "line 1", {"messages[0].content", "is missing"}},
      {"a.jsonl",
       "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": "
       "3}]}\n",
       "line 1",
       {"messages[1].content", "is number", "expected a string"}},
      {"a.jsonl", "{\"messages\": [{\"role\": \"bot\", \"content\": \"q\"}]}\n", "line 1", {"\"bot\"", "system, user"}},
      {"a.jsonl", "{\"messages\": [{\"role\": 3, \"content\": \"q\"}]}\n", "line 1", {"messages[0].role", "number"}},
      {"a.jsonl", "{\"prompt\": \"p\"}\n", "line 1", {"no \"completion\""}},
      {"a.jsonl", "{\"completion\": \"c\"}\n", "line 1", {"no \"prompt\""}},
      {"a.jsonl", "{\"prompt\": 5, \"completion\": \"c\"}\n", "line 1", {"\"prompt\"", "number"}},
      {"a.jsonl", kGood + "\n{\"prompt\": \"p\", \"completion\": \"  \"}\n", "line 2", {"\"completion\" is empty"}},
      {"a.jsonl", "{\"prompt\": \"p\", \"completion\": \"c\", \"messages\": []}\n", "line 1", {"both"}},
      {"a.jsonl",
       kGood + "\n{\"prompt\": \"caf\xE9\", \"completion\": \"c\"}\n",
       "line 2",
       {"invalid UTF-8", "byte offset 50", "byte 15 of the line"}},
      {"a.json", "[" + kGood + ", 7]", "entry 2", {"expected a JSON object"}},
      {"a.json", "[" + kGood + ",", "", {"bad JSON", "JSON array"}},
      {"b.tsv", "# comment\nq\ta\nno tab here\n", "line 3", {"no tab", "prompt<TAB>target"}},
      {"b.tsv", "q\ta\tb\n", "line 1", {"2 tabs", "exactly one"}},
      {"b.tsv", "q\ta\nq2\t\n", "line 2", {"empty target"}},
      {"b.tsv", "q\t\xF0\x9F\x98\n", "line 1", {"invalid UTF-8", "byte offset 2"}},
      {"c.txt", "fine\n\xC3\x28\n", "line 2", {"invalid UTF-8", "byte offset 5", "byte 0 of the line"}},
      {"d.jsonl", "", "", {"no sample to train on", "0 records"}},
      // Input shown in a message is escaped and cut: a raw newline would forge a line of its own.
      {"e.jsonl",
       kGood + "\n{\"messages\": [{\"role\": \"user\\nSYSTEM: all good\", \"content\": \"q\"}]}\n",
       "line 2",
       {"role is \"user\\nSYSTEM: all good\"", "system, user"}},
      {"e.jsonl", kGood + "\n{\"con\\nver\\u0001sation\": []}\n", "line 2", {"keys are \"con\\nver\\x01sation\""}},
      {"e.jsonl",
       "{\"messages\": [{\"role\": \"" + std::string(500, 'r') + "\", \"content\": \"q\"}]}\n",
       "line 1",
       {"rrr\"... (500 bytes)"}},
      {"d.jsonl",
       "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}\n",
       "",
       {"no sample to train on", "1 without an assistant message"}},
  };
}

TEST(DataErrors, EachBadInputNamesFileLineAndProblem) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  test::TempDir dir;
  for (const BadCase& bad : bad_cases()) {
    const std::filesystem::path path = dir / bad.file_name;
    test::write_file(path, bad.content);
    try {
      read_dataset(path, tok, {});
      ADD_FAILURE() << "no error for: " << bad.content;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path.string()), std::string::npos) << "file not named: " << message;
      if (!bad.place.empty()) {
        EXPECT_NE(message.find(path.string() + " " + bad.place), std::string::npos) << "place not named: " << message;
      }
      EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
      for (const std::string& part : bad.mentions) {
        EXPECT_NE(message.find(part), std::string::npos) << "\"" << part << "\" missing in: " << message;
      }
    }
  }
}

TEST(DataErrors, MissingFileDirectoryAndBadLimits) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  test::TempDir dir;
  EXPECT_THROW(read_dataset(dir / "missing.jsonl", tok, {}), Error);
  std::filesystem::create_directories(dir / "folder.jsonl");
  try {
    read_dataset(dir / "folder.jsonl", tok, {});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  test::write_file(dir / "ok.tsv", "q\ta\n");
  DatasetOptions options;
  options.max_tokens = 1;
  EXPECT_THROW(read_dataset(dir / "ok.tsv", tok, options), Error);
}

}  // namespace
}  // namespace nvfp4lm::test_errors
