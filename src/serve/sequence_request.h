// From an OpenAI request to what the batch engine runs (infer/batch_engine.h SequenceSpec): the prompt's token ids
// (chat messages rendered with the model's chat template as `generate` renders them; completion text encoded as
// `generate --raw` does; token ids as given), the token budget, sampling, stop strings and end-of-sequence ids.
//
// The context rule is vLLM's: prompt + max_tokens may not exceed the context per sequence (400, code
// "context_length_exceeded", with the numbers). Without max_tokens a chat answer may fill the context and a
// completion gets 16 tokens (the OpenAI API's default for /v1/completions).
//
// tool_choice "required" or a named function forces one call by constrained decoding: the answer is exactly
//   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
// byte for byte as the Qwen3 templates render a call (ARGS matching the tool's parameters schema, any object when it
// has none), one alternative per allowed tool. With a template whose generation prompt opens a think block
// (Qwen3-Thinking-2507) the forced answer first closes it empty ("\n</think>\n\n", as the template renders an empty
// reasoning): a forced call skips the reasoning rather than letting the model think inside the constraint.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "infer/batch_engine.h"
#include "serve/openai_request.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::serve {

// Per server: how prompts become tokens and what ends an answer.
struct PromptRules {
  std::shared_ptr<const ChatTemplate> chat_template;  // --chat-template (tokenizer/chat_template.h); set by Server
  std::optional<bool> enable_thinking;  // --no-think: false; a request's chat_template_kwargs.enable_thinking wins
  std::vector<int32_t> eos_ids;         // end_of_sequence_ids() (infer/stop_conditions.h)
  int64_t context = 0;                  // tokens per sequence (BatchEngine::context())
  int64_t vocab_size = 0;               // ids a token-id prompt may use: the tokenizer's, within the model's
};

// A chat request's messages rendered with the template, its tools and chat_template_kwargs, and a generation prompt.
// Error from the template (e.g. its raise_exception).
std::string render_prompt(const CompletionRequest& request, const PromptRules& rules);

// The request's prompt as token ids (no length check): chat messages rendered with the template and a generation
// prompt, text encoded, ids checked against the vocabulary. ApiError 400 when it cannot be tokenized.
std::vector<int32_t> prompt_tokens(const CompletionRequest& request, const Tokenizer& tokenizer,
                                   const PromptRules& rules);

// How the answer is read back (openai_response.h): the reasoning split when the template handles reasoning (it
// mentions reasoning_content or <think>), tool calls when the request has tools and tool_choice is not "none".
struct AnswerParsing {
  bool reasoning = false;
  bool starts_in_reasoning = false;     // the generation prompt opened the think block
  std::vector<std::string> tool_names;  // empty: calls are not parsed
  size_t max_tool_calls = static_cast<size_t>(-1);
};
AnswerParsing answer_parsing(const CompletionRequest& request, const PromptRules& rules);

// The grammar that forces a tool call (tool_choice required / named), or null. ApiError 400 naming the tool's
// parameters when its schema cannot be compiled.
std::shared_ptr<const constrain::Grammar> forced_tool_call_grammar(const CompletionRequest& request,
                                                                   const PromptRules& rules);

// ApiError 400 when the prompt or logit_bias holds an id outside the vocabulary, the prompt is empty, or it does not
// fit the context with max_tokens. `seed` is used when the request has none.
SequenceSpec to_sequence_spec(const CompletionRequest& request, const Tokenizer& tokenizer, const PromptRules& rules,
                              uint64_t seed);

}  // namespace nvfp4lm::serve
