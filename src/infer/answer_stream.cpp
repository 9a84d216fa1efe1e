// See answer_stream.h.
#include "infer/answer_stream.h"

#include <algorithm>

#include "core/error.h"

namespace nvfp4lm {

AnswerStream::AnswerStream(const Tokenizer& tokenizer, const GenerationOptions& options, int64_t max_new_tokens,
                           bool context_bound)
    : tokenizer_(tokenizer),
      eos_ids_(options.eos_ids),
      decoder_(tokenizer, options.skip_special),
      filter_(options.stop_strings),
      max_new_tokens_(max_new_tokens),
      context_bound_(context_bound) {
  NVFP4LM_ASSERT(max_new_tokens > 0, "AnswerStream: a budget of {} tokens", max_new_tokens);
}

std::string AnswerStream::finish(StopReason reason) {
  finished_ = true;
  reason_ = reason;
  // What the decoder and the filter still hold; the decoder's last bytes may still complete a stop string.
  std::string text = filter_.push(decoder_.finish());
  text += filter_.flush();
  return text;
}

// The text `token` makes final, through the stop-string filter; a stop string found ends the answer.
std::string AnswerStream::decode(int32_t token) {
  std::string text = filter_.push(decoder_.push(token));
  if (filter_.stopped()) {
    finished_ = true;
    reason_ = StopReason::StopString;
    detail_ = filter_.matched();
  }
  return text;
}

std::string AnswerStream::push(int32_t token) {
  NVFP4LM_ASSERT(!finished_, "AnswerStream::push after the answer ended");
  ++tokens_;
  if (std::binary_search(eos_ids_.begin(), eos_ids_.end(), token)) {
    detail_ = std::string(tokenizer_.token_text(token));
    return finish(StopReason::EndOfSequence);
  }
  std::string text = decode(token);
  if (finished_) return text;
  if (tokens_ >= max_new_tokens_) text += finish(context_bound_ ? StopReason::ContextFull : StopReason::MaxTokens);
  return text;
}

std::string AnswerStream::push_last(int32_t token) {
  NVFP4LM_ASSERT(!finished_, "AnswerStream::push_last after the answer ended");
  if (std::binary_search(eos_ids_.begin(), eos_ids_.end(), token)) return push(token);
  ++tokens_;
  std::string text = decode(token);
  if (finished_) return text;
  return text + finish(StopReason::EndOfSequence);
}

std::string AnswerStream::close() {
  if (finished_) return {};
  finished_ = true;
  std::string text = filter_.push(decoder_.finish());
  text += filter_.flush();
  return text;
}

}  // namespace nvfp4lm
