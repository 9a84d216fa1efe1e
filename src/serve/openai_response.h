// What a client receives for one chat completion or completion, built from the batch engine's events
// (infer/batch_engine.h SequenceEvent), in the OpenAI API's shapes:
//  - stream = false: one object, "chat.completion" (choices[0].message) or "text_completion" (choices[0].text),
//    with finish_reason ("stop" for an end-of-sequence token or a stop string, "length" for max_tokens or the
//    context), usage, and logprobs when asked (chat: {"content": [{token, logprob, bytes, top_logprobs}]},
//    completions: the legacy {tokens, token_logprobs, top_logprobs, text_offset});
//  - stream = true: server-sent events "data: {chunk}\n\n" — for chat a first chunk with the role, one chunk per
//    token that shows text (or carries logprobs), a last chunk with finish_reason, a usage chunk (choices []) when
//    stream_options.include_usage — then "data: [DONE]\n\n". An error after the stream began is sent as a
//    "data: {\"error\": ...}" event before [DONE], as vLLM does.
// Token strings are their UTF-8 text (a token that ends inside a character shows U+FFFD) and, in chat logprobs,
// their raw bytes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "infer/batch_engine.h"
#include "serve/api_error.h"
#include "serve/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::serve {

// "stop" or "length".
const char* finish_reason(StopReason reason);

class CompletionResponse {
 public:
  // id: "chatcmpl-..." / "cmpl-..."; created: Unix seconds; model: the served name.
  CompletionResponse(const CompletionRequest& request, const Tokenizer& tokenizer, std::string id, int64_t created,
                     std::string model);

  // Adds the next event of the sequence; returns the SSE text it adds when streaming (else "").
  std::string add(const SequenceEvent& event);
  // Streaming: the closing events (usage when asked, then [DONE]).
  std::string stream_end() const;
  // Streaming: an error after the stream began, then [DONE].
  static std::string stream_error(const ApiError& error);
  // The whole response object (stream = false), once the sequence finished.
  nlohmann::json body() const;

  bool finished() const { return finished_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t completion_tokens() const { return completion_tokens_; }

 private:
  nlohmann::json chunk(nlohmann::json choice) const;
  nlohmann::json usage() const;
  // The logprobs of one token in this endpoint's format (chat: one "content" entry; completions: one position).
  nlohmann::json chat_logprob(const NextTokenLogprobs& logprobs) const;
  void add_completion_logprob(const NextTokenLogprobs& logprobs, nlohmann::json& target) const;

  bool chat_;
  bool stream_;
  bool include_usage_;
  int top_logprobs_;
  Tokenizer tokenizer_;
  std::string id_;
  int64_t created_;
  std::string model_;

  bool started_ = false;  // the role chunk was sent (chat stream)
  bool finished_ = false;
  std::string text_;
  std::string finish_reason_ = "length";
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  nlohmann::json logprobs_;  // accumulated (stream = false)
};

}  // namespace nvfp4lm::serve
