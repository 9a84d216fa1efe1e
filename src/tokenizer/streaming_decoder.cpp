// See streaming_decoder.h. Everything except an unfinished trailing sequence is emitted at once; since a
// held suffix is always the start of a well-formed sequence, splitting there never changes how invalid
// bytes are replaced compared with decoding the whole byte string.
#include "tokenizer/streaming_decoder.h"

#include "tokenizer/utf8.h"

namespace nvfp4lm {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamingDecoder::push(int32_t id) {
  std::string_view bytes = tokenizer_.token_bytes(id);
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  pending_.append(bytes);
  size_t hold = tokenizer::incomplete_utf8_suffix(pending_);
  std::string out = tokenizer::to_valid_utf8(std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamingDecoder::finish() {
  std::string out = tokenizer::to_valid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace nvfp4lm
