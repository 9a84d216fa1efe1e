// Reading the body of POST /v1/chat/completions and POST /v1/completions (OpenAI API) into a CompletionRequest.
// Every field is type- and range-checked; a bad one is an ApiError 400 naming it (param) and what it should be.
//
// Supported: model, messages (string content, or a list of {"type": "text"} parts; roles system / developer (read
// as system) / user / assistant / tool), prompt (text, token ids, or a one-element list of either), stream,
// stream_options.include_usage, max_tokens / max_completion_tokens, temperature, top_p, top_k, min_p,
// repetition_penalty, presence_penalty / frequency_penalty (-2..2), logit_bias (up to 1024 token ids as decimal
// strings, each to a bias of -100..100; the ids are checked against the vocabulary in to_sequence_spec), seed, stop
// (a string or up to 16), n (1 to 16 choices), logprobs / top_logprobs (chat: bool + 0..20; completions: 0..20),
// chat_template_kwargs (enable_thinking as vLLM; all of them reach the template), and the inert OpenAI fields user,
// metadata, store, service_tier. OpenAI features this server does not have are refused when they would change the
// answer (best_of > 1, echo, suffix, the legacy functions / function_call, several prompts).
// Tools (chat only): tools (OpenAI's function form, checked by check_chat_tools; a 400's param is the JSON path of
// the fault, e.g. "tools[0].function.name"), rendered by the chat template (one that never mentions tools: 400);
// tool_choice "none" (tools rendered, the answer never read for calls), "auto" (the default with tools: calls the
// model writes become tool_calls), "required" or {"type": "function", "function": {"name"}} (a name not in tools is
// a 400): a call is forced by constrained decoding (sequence_request.h); parallel_tool_calls false keeps at most one
// call.
// The body is read as nlohmann::ordered_json, so messages, tools and schemas keep the client's key order.
// response_format (chat only): "text"; {"type": "json_object"} (any JSON object) and {"type": "json_schema",
// "json_schema": {"name", "schema", "strict", "description"}} compile the grammar the answer is constrained to
// (infer/constrain/json_schema.h; strict or not, the schema is always enforced); a schema keyword that is not
// supported is a 400 naming it and where it is, and so is a max_tokens below the shortest answer of the format.
// Fields the API does not define are ignored, as vLLM and llama.cpp's server do (the official clients send
// extra fields of newer API versions); `ignored` lists them for the log.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "infer/constrain/grammar.h"
#include "infer/sampler.h"
#include "tokenizer/chat.h"

namespace nvfp4lm::serve {

enum class Endpoint { ChatCompletions, Completions };
const char* endpoint_path(Endpoint endpoint);  // "/v1/chat/completions"

// What a request leaves out: the server's sampling defaults (serve's sampling flags; the seed is drawn per request).
struct RequestDefaults {
  SamplingOptions sampling;
};

// What the answer may do with tools (see read_tools in openai_request.cpp).
enum class ToolChoice { None, Auto, Required, Named };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::ChatCompletions;
  std::string model;  // empty: not given
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  std::vector<ChatMessage> messages;  // chat
  std::string prompt_text;            // completions with a text prompt
  std::vector<int32_t> prompt_ids;    // completions with a token-id prompt
  bool prompt_is_ids = false;
  std::optional<int64_t> max_tokens;  // max_completion_tokens, else max_tokens
  SamplingOptions sampling;           // defaults, then the request's values (logit_bias sorted); seed below
  std::optional<uint64_t> seed;
  int n = 1;  // choices: n sequences, choice i sampled with seed + i
  std::vector<std::string> stop;
  int top_logprobs = -1;                // -1: no logprobs
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();  // all of them, to the template
  nlohmann::ordered_json tools;                                // null: none; a list of functions (check_chat_tools)
  std::vector<std::string> tool_names;                         // the functions of tools, in order
  ToolChoice tool_choice = ToolChoice::None;                   // Auto when tools are given and tool_choice is not
  std::string tool_choice_name;                                // Named: the function
  bool parallel_tool_calls = true;                             // false: at most one call
  std::shared_ptr<const constrain::Grammar> response_grammar;  // response_format json_object / json_schema
  std::vector<std::string> ignored;                            // fields not part of the API, ignored
};

// body: the parsed JSON (ordered: core/json_text.h try_parse_ordered_json). ApiError 400 for anything out of place.
CompletionRequest parse_completion_request(const nlohmann::ordered_json& body, Endpoint endpoint,
                                           const RequestDefaults& defaults);

}  // namespace nvfp4lm::serve
