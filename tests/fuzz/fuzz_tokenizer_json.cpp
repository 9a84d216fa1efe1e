// Fuzz target: a tokenizer.json text (tokenizer/tokenizer_json_reader.h, then the whole load: Tokenizer::from_json
// with the tiny tokenizer fixture's tokenizer_config.json). The input is the tokenizer.json text. A tokenizer that
// loads is then used (tokenizer_checks.h: encode, decode, streaming decode, chat).
#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json_reader.h"
#include "tokenizer_checks.h"

using namespace nvfp4lm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string config = fuzz::read_source_file("tests/fixtures/tiny-tokenizer/tokenizer_config.json");
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::expect_error_only([&] {
    const tokenizer::TokenizerJsonParts parts = tokenizer::read_tokenizer_json(text, "fuzz tokenizer.json");
    for (const auto& [span, id] : parts.vocab) {
      FUZZ_CHECK(size_t{span.offset} + span.length <= parts.vocab_pool.size(), "vocab entry outside its pool");
    }
    for (const auto& [left, right] : parts.merges) {
      FUZZ_CHECK(size_t{left.offset} + left.length <= parts.merges_pool.size() &&
                     size_t{right.offset} + right.length <= parts.merges_pool.size(),
                 "merge outside its pool");
    }
  });
  fuzz::expect_error_only([&] {
    const Tokenizer tokenizer = Tokenizer::from_json(text, config, "fuzz tokenizer.json");
    fuzz::exercise_tokenizer(tokenizer);
  });
  return 0;
}
