// See tokenize_endpoint.h.
#include "serve/tokenize_endpoint.h"

#include <fmt/format.h>

#include <cstdint>
#include <vector>

#include "core/json_text.h"
#include "serve/api_error.h"

namespace nvfp4lm::serve {
namespace {

using nlohmann::json;

// Token ids a /detokenize request may hold: as many as the largest body holds.
constexpr size_t kMaxDetokenizeIds = size_t{1} << 22;

}  // namespace

json tokenize_answer(const nlohmann::ordered_json& body, const Tokenizer& tokenizer, const PromptRules& rules,
                     const RequestDefaults& defaults) {
  if (!body.is_object()) throw invalid_request("the /tokenize body must be a JSON object with 'prompt' or 'messages'");
  const bool chat = body.contains("messages");
  nlohmann::ordered_json request_body = body;
  if (!chat) {
    // llama-server calls the text "content".
    if (!request_body.contains("prompt") && request_body.contains("content"))
      request_body["prompt"] = request_body["content"];
    if (!request_body.contains("prompt"))
      throw invalid_request("/tokenize needs 'prompt' (or 'content') text, or chat 'messages'", "prompt");
    if (!request_body["prompt"].is_string())
      throw invalid_request("/tokenize's 'prompt' must be a string (token ids are tokens already)", "prompt");
  }
  // Read as the completion endpoints read their prompts, so the tokens are the ones a completion would run.
  const CompletionRequest request =
      parse_completion_request(request_body, chat ? Endpoint::ChatCompletions : Endpoint::Completions, defaults);
  const std::vector<int32_t> ids = prompt_tokens(request, tokenizer, rules);
  return {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", rules.context}};
}

json apply_template_answer(const nlohmann::ordered_json& body, const PromptRules& rules,
                           const RequestDefaults& defaults) {
  if (!body.is_object() || !body.contains("messages"))
    throw invalid_request("the /apply-template body must be a JSON object with chat 'messages'", "messages");
  const CompletionRequest request = parse_completion_request(body, Endpoint::ChatCompletions, defaults);
  try {
    return {{"prompt", render_prompt(request, rules)}};
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {  // the template raised (raise_exception) or met a value it cannot use
    throw invalid_request(fmt::format("the chat template cannot render these messages: {}", e.what()), "messages");
  }
}

json detokenize_answer(const json& body, const Tokenizer& tokenizer, const PromptRules& rules) {
  if (!body.is_object() || !body.contains("tokens"))
    throw invalid_request("the /detokenize body must be a JSON object with 'tokens': a list of token ids", "tokens");
  const json& tokens = body["tokens"];
  if (!tokens.is_array()) throw invalid_request("'tokens' must be a list of token ids", "tokens");
  if (tokens.size() > kMaxDetokenizeIds)
    throw invalid_request(fmt::format("'tokens' holds {} ids; at most {}", tokens.size(), kMaxDetokenizeIds), "tokens");
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const json& id = tokens[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= rules.vocab_size)
      throw invalid_request(
          fmt::format("'tokens'[{}] must be a token id in [0, {}), got {}", i, rules.vocab_size, json_excerpt(id, 40)),
          "tokens");
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  const std::string text = tokenizer.decode(ids);
  return {{"prompt", text}, {"content", text}};
}

}  // namespace nvfp4lm::serve
