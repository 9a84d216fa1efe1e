// Fuzz target: decoding token ids with the bundled Qwen3 tokenizer (models/qwen3-tokenizer, loaded once). The input
// is read as little-endian 32-bit words; a word with the top bit clear becomes the id word % (vocab_size + 16)
// (mostly real ids, some just past the end), any other is taken as it is (negative or huge ids). decode must fail
// with Error exactly when some id is not a token, give valid UTF-8 otherwise, agree with the streaming decoder,
// and re-encoding the text must give it back (tokenizer_checks.h).
#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_checks.h"

using namespace nvfp4lm;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fuzz::bundled_qwen3();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& qwen3 = fuzz::bundled_qwen3();
  std::vector<int32_t> ids;
  bool all_tokens = true;
  for (size_t at = 0; at + 4 <= size; at += 4) {
    uint32_t word;
    std::memcpy(&word, data + at, 4);
    const int32_t id =
        (word >> 31) ? static_cast<int32_t>(word) : static_cast<int32_t>(word % (qwen3.vocab_size() + 16));
    ids.push_back(id);
    all_tokens = all_tokens && fuzz::expect_error_only([&] { (void)qwen3.token_bytes(id); });
  }
  for (bool skip_special : {false, true}) {
    std::string text;
    const bool decoded = fuzz::expect_error_only([&] { text = qwen3.decode(ids, skip_special); });
    FUZZ_CHECK(decoded == all_tokens, "decode {} although {} id is a token", decoded ? "succeeded" : "failed",
               all_tokens ? "every" : "not every");
    fuzz::check_decode(qwen3, ids, skip_special);
    if (decoded) fuzz::check_round_trip(qwen3, text, /*allow_special=*/true);
  }
  return 0;
}
