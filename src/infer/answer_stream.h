// AnswerStream: what becomes of each sampled token of one answer — the end-of-sequence check, incremental UTF-8
// decoding (tokenizer/streaming_decoder.h), stop strings (stop_conditions.h) and the token budget — so that the
// one-sequence Generator (generator.h) and the batch engine (batch_engine.h) end answers by the same rules:
//  - an end-of-sequence token ends the answer and is never shown (stop detail: its text);
//  - text is shown once whole UTF-8 characters are known, minus a tail that could still become a stop string;
//    a completed stop string ends the answer, and neither it nor what follows is shown;
//  - the budget of max_new_tokens ends it after that many tokens (MaxTokens, or ContextFull when the context cut
//    the budget).
// When the answer ends by itself, the last push returns everything still held back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infer/generator.h"
#include "infer/stop_conditions.h"
#include "tokenizer/streaming_decoder.h"

namespace nvfp4lm {

class AnswerStream {
 public:
  // options: eos_ids, stop_strings and skip_special are used (Error for an empty stop string).
  AnswerStream(const Tokenizer& tokenizer, const GenerationOptions& options, int64_t max_new_tokens,
               bool context_bound);

  // Adds the next sampled token; returns the text that became final (possibly empty). Not after finished().
  std::string push(int32_t token);
  // push() of a token after which nothing may follow (a constrained answer's closing token): the answer ends with it
  // as EndOfSequence (empty detail; an end-of-sequence token keeps its text as the detail), whatever the budget.
  std::string push_last(int32_t token);
  // The answer is cut short from outside (a cancelled request): the text still held back.
  std::string close();

  bool finished() const { return finished_; }
  StopReason stop_reason() const { return reason_; }
  const std::string& stop_detail() const { return detail_; }  // the stop string, or the EOS token's text
  int64_t tokens() const { return tokens_; }
  int64_t max_new_tokens() const { return max_new_tokens_; }

 private:
  std::string finish(StopReason reason);
  std::string decode(int32_t token);  // through the stop-string filter; ends the answer at a stop string

  Tokenizer tokenizer_;
  std::vector<int32_t> eos_ids_;  // sorted
  StreamingDecoder decoder_;
  StopStringFilter filter_;
  int64_t max_new_tokens_;
  bool context_bound_;
  int64_t tokens_ = 0;
  bool finished_ = false;
  StopReason reason_ = StopReason::MaxTokens;
  std::string detail_;
};

}  // namespace nvfp4lm
