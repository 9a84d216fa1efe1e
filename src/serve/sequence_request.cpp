// See sequence_request.h.
#include "serve/sequence_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "serve/api_error.h"

namespace nvfp4lm::serve {
namespace {

constexpr int64_t kCompletionDefaultTokens = 16;

// The prompt's ids; at most `budget` of them for a text prompt (tokenizing past the context is wasted work and
// memory: a 7 MB prompt took seconds and 0.85 GiB), with `more` set when the text has more tokens than that.
std::vector<int32_t> prompt_tokens_within(const CompletionRequest& request, const Tokenizer& tokenizer,
                                          const PromptRules& rules, size_t budget, bool& more) {
  const char* param = request.endpoint == Endpoint::ChatCompletions ? "messages" : "prompt";
  try {
    std::vector<int32_t> ids;
    if (request.endpoint == Endpoint::ChatCompletions) {
      more = tokenizer.encode_prefix(render_prompt(request, rules), budget, ids);
      return ids;
    }
    if (!request.prompt_is_ids) {
      more = tokenizer.encode_prefix(request.prompt_text, budget, ids);
      return ids;
    }
  } catch (const Error& e) {  // e.g. invalid UTF-8 in a message
    throw invalid_request(fmt::format("'{}' cannot be tokenized: {}", param, e.what()), param);
  }
  for (int32_t id : request.prompt_ids)
    if (id >= rules.vocab_size)
      throw invalid_request(fmt::format("'prompt' token id {} is outside the vocabulary [0, {})", id, rules.vocab_size),
                            "prompt");
  return request.prompt_ids;
}

}  // namespace

std::string render_prompt(const CompletionRequest& request, const PromptRules& rules) {
  NVFP4LM_ASSERT(rules.chat_template != nullptr, "PromptRules without a chat template");
  ChatRenderOptions render;
  render.add_generation_prompt = true;
  render.enable_thinking = request.enable_thinking ? request.enable_thinking : rules.enable_thinking;
  render.tools = request.tools;
  render.kwargs = request.chat_template_kwargs;
  render.kwargs.erase("enable_thinking");  // passed above, after --no-think
  return rules.chat_template->render(request.messages, render);
}

std::vector<int32_t> prompt_tokens(const CompletionRequest& request, const Tokenizer& tokenizer,
                                   const PromptRules& rules) {
  bool more = false;
  return prompt_tokens_within(request, tokenizer, rules, std::numeric_limits<size_t>::max(), more);
}

SequenceSpec to_sequence_spec(const CompletionRequest& request, const Tokenizer& tokenizer, const PromptRules& rules,
                              uint64_t seed) {
  SequenceSpec spec;
  // Tokens up to the context are enough to tell whether the prompt leaves room for an answer.
  bool more = false;
  spec.prompt =
      prompt_tokens_within(request, tokenizer, rules, static_cast<size_t>(std::max<int64_t>(rules.context, 0)), more);
  const auto prompt = static_cast<int64_t>(spec.prompt.size());
  const char* param = request.endpoint == Endpoint::ChatCompletions ? "messages" : "prompt";
  if (prompt == 0 && !more)
    throw invalid_request(fmt::format("'{}' is empty: there is nothing to continue from", param), param);
  if (more || prompt >= rules.context)
    throw invalid_request(fmt::format("This model's maximum context length is {} tokens, but the {} has {}{} tokens, "
                                      "leaving no room for an answer; shorten it (or start the server with a larger "
                                      "--context)",
                                      rules.context, param, more ? "more than " : "", prompt),
                          param, "context_length_exceeded");
  const int64_t room = rules.context - prompt;
  if (request.max_tokens && *request.max_tokens > room)
    throw invalid_request(
        fmt::format("This model's maximum context length is {} tokens. However, you requested {} "
                    "tokens ({} in the {}, {} for the answer); reduce max_tokens to at most {} or "
                    "shorten the {}",
                    rules.context, prompt + *request.max_tokens, prompt, param, *request.max_tokens, room, param),
        "max_tokens", "context_length_exceeded");
  const int64_t fallback = request.endpoint == Endpoint::Completions ? std::min(kCompletionDefaultTokens, room) : room;
  spec.options.max_new_tokens = request.max_tokens.value_or(fallback);
  for (const auto& [id, bias] : request.sampling.logit_bias)
    if (id >= rules.vocab_size)
      throw invalid_request(fmt::format("'logit_bias' key \"{}\": token id {} is outside the vocabulary [0, {})", id,
                                        id, rules.vocab_size),
                            "logit_bias");
  spec.options.sampling = request.sampling;
  spec.options.sampling.seed = request.seed.value_or(seed);
  spec.options.eos_ids = rules.eos_ids;
  spec.options.stop_strings = request.stop;
  spec.options.skip_special = true;
  spec.top_logprobs = request.top_logprobs;
  spec.grammar = request.response_grammar;
  return spec;
}

}  // namespace nvfp4lm::serve
