// POST /tokenize and POST /detokenize: what a client needs to count tokens or budget a prompt without running the
// model. Both vLLM's and llama-server's request shapes are read, and the answers carry both servers' fields, so
// either's clients work unchanged:
//   /tokenize    {"prompt": "text"} (vLLM) or {"content": "text"} (llama-server): the text encoded as a completion
//                prompt is; {"messages": [...]} (vLLM): the chat rendered with the model's template and a generation
//                prompt, as /v1/chat/completions renders it (chat_template_kwargs.enable_thinking too)
//                -> {"tokens": [ids], "count": n, "max_model_len": context}
//   /detokenize  {"tokens": [ids]} -> {"prompt": "text", "content": "text"} (invalid UTF-8 shown as U+FFFD)
//   /apply-template  (llama-server's) a chat request's body -> {"prompt": "text"}: the text its chat template renders
//                for /v1/chat/completions (messages, tools, chat_template_kwargs; with the generation prompt), as
//                apply_chat_template(tokenize=False) gives it
// Anything else is an ApiError 400 naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include "serve/openai_request.h"
#include "serve/sequence_request.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::serve {

nlohmann::json tokenize_answer(const nlohmann::ordered_json& body, const Tokenizer& tokenizer, const PromptRules& rules,
                               const RequestDefaults& defaults);
nlohmann::json apply_template_answer(const nlohmann::ordered_json& body, const PromptRules& rules,
                                     const RequestDefaults& defaults);
nlohmann::json detokenize_answer(const nlohmann::json& body, const Tokenizer& tokenizer, const PromptRules& rules);

}  // namespace nvfp4lm::serve
