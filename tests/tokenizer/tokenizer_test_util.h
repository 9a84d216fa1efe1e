// Helpers shared by the tokenizer tests: the bundled Qwen3 tokenizer (loaded once per process) and
// JSON-lines fixture reading.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::test {

inline const Tokenizer& qwen3_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::load(bundled_qwen3_tokenizer_dir());
  return tokenizer;
}

// All lines of a JSON-lines file, parsed; fails the test (and returns empty) when it cannot be read.
inline std::vector<nlohmann::json> read_jsonl(const fs::path& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

inline std::vector<int32_t> ids_of(const nlohmann::json& array) { return array.get<std::vector<int32_t>>(); }

}  // namespace nvfp4lm::test
