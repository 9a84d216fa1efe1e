// StreamingDecoder: turns token ids into UTF-8 text one token at a time, for printing generated text as it
// comes. A token may end in the middle of a UTF-8 character (byte-level BPE splits emoji and CJK
// characters across tokens); those bytes are held back until the character completes, so every string
// returned is valid UTF-8 and nothing is printed twice. The concatenation of all push() results and
// finish() equals Tokenizer::decode() of the same ids (invalid bytes become U+FFFD the same way).
//
//   StreamingDecoder stream(tokenizer);
//   for (int32_t id : generated) std::fputs(stream.push(id).c_str(), stdout);
//   std::fputs(stream.finish().c_str(), stdout);
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

class StreamingDecoder {
 public:
  // Keeps a copy of the tokenizer (cheap: shared data).
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  // Adds one token; returns the text that is now complete (possibly empty). Throws Error for a bad id.
  std::string push(int32_t id);
  // Returns what is still held (an unfinished character becomes U+FFFD) and resets the decoder.
  std::string finish();
  // Drops held bytes without returning them.
  void reset() { pending_.clear(); }
  // Bytes held back, waiting for the rest of a character (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace nvfp4lm
