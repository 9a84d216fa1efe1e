// Properties of a loaded tokenizer (tokenizer/tokenizer.h), shared by the tokenizer fuzz targets.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace nvfp4lm::fuzz {

// The bundled Qwen3 tokenizer (models/qwen3-tokenizer), loaded on the first call. The targets that use it call this
// from LLVMFuzzerInitialize: loading takes seconds in the unoptimised sanitizer build, and inside the first input it
// counted against libFuzzer's -timeout (a CI run on a loaded machine reported the empty input as a timeout).
const Tokenizer& bundled_qwen3();

// For a tokenizer built from a fuzzed file: encodes a few fixed probes (ASCII, CJK, emoji, whitespace runs,
// special tokens; with and without allow_special), a chat in both templates, and decodes the first ids. Errors
// may come out; otherwise ids are inside the vocabulary and decoded text is valid UTF-8.
void exercise_tokenizer(const Tokenizer& tokenizer);

// For a complete byte-level tokenizer (a token for every byte, as Qwen3's) and valid UTF-8 `text`: encode must
// succeed, decode(encode(text)) is the text (canonically equivalent to it when the tokenizer normalizes to NFC), the
// offsets of encode_with_offsets are ordered and inside the text, and the streaming decoder gives the same text as
// decode.
void check_round_trip(const Tokenizer& tokenizer, std::string_view text, bool allow_special);

// decode(ids) either fails with Error or gives valid UTF-8 that the streaming decoder reproduces (which must then
// succeed too).
void check_decode(const Tokenizer& tokenizer, std::span<const int32_t> ids, bool skip_special);

}  // namespace nvfp4lm::fuzz
