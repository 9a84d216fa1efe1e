// Fuzz target: a tokenizer_config.json text, loaded with the tiny tokenizer fixture's tokenizer.json
// (Tokenizer::from_json): eos/pad tokens, chat template (a string or a list of named templates), flags. The input
// is the tokenizer_config.json text. A tokenizer that loads is then used (tokenizer_checks.h).
#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_checks.h"

using namespace nvfp4lm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string tokenizer_json = fuzz::read_source_file("tests/fixtures/tiny-tokenizer/tokenizer.json");
  fuzz::expect_error_only([&] {
    const Tokenizer tokenizer = Tokenizer::from_json(tokenizer_json, fuzz::as_text(data, size), "fuzz config");
    fuzz::exercise_tokenizer(tokenizer);
  });
  return 0;
}
