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

inline std::vector<int32_t> ids_of(const nlohmann::json& array) { return array.get<std::vector<int32_t>>(); }

}  // namespace nvfp4lm::test
