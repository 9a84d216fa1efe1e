// What a client receives for one chat completion or completion, built from the batch engine's events
// (infer/batch_engine.h SequenceEvent), in the OpenAI API's shapes:
//  - stream = false: one object, "chat.completion" (choices[i].message) or "text_completion" (choices[i].text),
//    with finish_reason ("stop" for an end-of-sequence token or a stop string, "length" for max_tokens or the
//    context), usage, and logprobs when asked (chat: {"content": [{token, logprob, bytes, top_logprobs}]},
//    completions: the legacy {tokens, token_logprobs, top_logprobs, text_offset});
//  - stream = true: server-sent events "data: {chunk}\n\n" — for chat a first chunk with the role, one chunk per
//    token that shows text (or carries logprobs), a last chunk with finish_reason, a usage chunk (choices []) when
//    stream_options.include_usage — then "data: [DONE]\n\n". An error after the stream began is sent as a
//    "data: {\"error\": ...}" event before [DONE], as vLLM does.
// With n > 1 the request runs as n sequences, choice i being sequence i: the body holds n choices, stream chunks carry
// their choice's index (each choice has its own role chunk and last chunk, as OpenAI sends them), and usage counts
// the prompt once and the tokens of every choice. Token strings are their UTF-8 text (a token that ends inside a
// character shows U+FFFD) and, in chat logprobs, their raw bytes; completions' text_offset counts characters (code
// points) of the text before the token, as OpenAI's and vLLM's do.
//
// A chat answer is read back as AnswerParsing says (sequence_request.h): its think block becomes
// message.reasoning_content (reasoning_parser.h) and its <tool_call> blocks message.tool_calls
// [{"id": "call_<24 random characters>", "type": "function", "function": {"name", "arguments": JSON text}}]
// (tool_call_parser.h); content is the rest (null when it is empty and there are calls, as OpenAI sends a pure tool
// call), and finish_reason is "tool_calls" when the answer made calls and stopped by itself. Streaming sends
// delta.reasoning_content, then delta.content as it comes (text that may still open a call is held back until it is
// known), and each call as one delta.tool_calls entry {index, id, type, function: {name, arguments}} whole, when its
// block closes (the clients accumulate arguments either way; a call's JSON is only known valid once it is complete).
// Logprobs ride on the first chunk a token gives (a token whose text is held back gets a chunk with an empty content).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "infer/batch_engine.h"
#include "serve/api_error.h"
#include "serve/openai_request.h"
#include "serve/reasoning_parser.h"
#include "serve/sequence_request.h"
#include "serve/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::serve {

// "stop" or "length".
const char* finish_reason(StopReason reason);

class CompletionResponse {
 public:
  // id: "chatcmpl-..." / "cmpl-..."; created: Unix seconds; model: the served name.
  CompletionResponse(const CompletionRequest& request, const Tokenizer& tokenizer, std::string id, int64_t created,
                     std::string model, const AnswerParsing& parsing = {});

  // Adds the next event of choice `index`'s sequence; returns the SSE text it adds when streaming (else "").
  std::string add(const SequenceEvent& event, int index = 0);
  // Streaming: the closing events (usage when asked, then [DONE]).
  std::string stream_end() const;
  // Streaming: an error after the stream began, then [DONE].
  static std::string stream_error(const ApiError& error);
  // The whole response object (stream = false), once every choice finished.
  nlohmann::json body() const;

  int choices() const { return static_cast<int>(choices_.size()); }
  bool finished() const;
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t completion_tokens() const;

 private:
  struct Choice {
    bool started = false;  // the role chunk was sent (chat stream)
    bool finished = false;
    std::string text;
    int64_t text_chars = 0;  // code points in text
    std::string finish_reason = "length";
    int64_t completion_tokens = 0;
    nlohmann::json logprobs;  // accumulated (stream = false)
    std::optional<ReasoningParser> reasoning_parser;
    std::optional<ToolCallParser> tool_parser;
    std::string reasoning;  // the parsed answer: reasoning_content, content, tool_calls
    std::string content;
    nlohmann::json tool_calls = nlohmann::json::array();
  };
  // What one event adds to a choice's parsed answer (the parsers' outputs, flushed when it finished).
  struct Parsed {
    std::string reasoning;
    std::string content;
    std::vector<nlohmann::json> calls;
  };
  Parsed parse(Choice& state, const std::string& text, bool finished);

  nlohmann::json chunk(nlohmann::json choice) const;
  nlohmann::json usage() const;
  // The logprobs of one token in this endpoint's format (chat: one "content" entry; completions: one position at
  // character offset `offset`).
  nlohmann::json chat_logprob(const NextTokenLogprobs& logprobs) const;
  void add_completion_logprob(const NextTokenLogprobs& logprobs, int64_t offset, nlohmann::json& target) const;

  bool chat_;
  bool stream_;
  bool include_usage_;
  int top_logprobs_;
  Tokenizer tokenizer_;
  std::string id_;
  int64_t created_;
  std::string model_;

  int64_t prompt_tokens_ = 0;
  std::vector<Choice> choices_;
};

}  // namespace nvfp4lm::serve
