// See sequence_request.h.
#include "serve/sequence_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "infer/constrain/grammar_constraint.h"
#include "infer/constrain/json_schema.h"
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
  // A template that never mentions tools would drop them silently: the model would not know them.
  if (!request.tools.is_null() && !rules.chat_template->supports_tools())
    throw invalid_request(fmt::format("'tools' cannot be used: the chat template ({}) does not render tools",
                                      rules.chat_template->origin()),
                          "tools");
  ChatRenderOptions render;
  render.add_generation_prompt = true;
  render.enable_thinking = request.enable_thinking ? request.enable_thinking : rules.enable_thinking;
  render.tools = request.tools;
  render.kwargs = request.chat_template_kwargs;
  render.kwargs.erase("enable_thinking");  // passed above, after --no-think
  return rules.chat_template->render(request.messages, render);
}

AnswerParsing answer_parsing(const CompletionRequest& request, const PromptRules& rules) {
  AnswerParsing parsing;
  if (request.endpoint != Endpoint::ChatCompletions) return parsing;
  if (rules.chat_template != nullptr) {
    const std::string& source = rules.chat_template->source();
    parsing.reasoning = source.find("reasoning_content") != std::string::npos ||
                        source.find("<think>") != std::string::npos || rules.chat_template->prompt_opens_think();
    parsing.starts_in_reasoning = rules.chat_template->prompt_opens_think();
  }
  if (request.tool_choice != ToolChoice::None) {
    parsing.tool_names = request.tool_names;
    if (request.tool_choice == ToolChoice::Named) parsing.tool_names = {request.tool_choice_name};
  }
  if (!request.parallel_tool_calls) parsing.max_tool_calls = 1;
  return parsing;
}

std::shared_ptr<const constrain::Grammar> forced_tool_call_grammar(const CompletionRequest& request,
                                                                   const PromptRules& rules) {
  if (request.tool_choice != ToolChoice::Required && request.tool_choice != ToolChoice::Named) return nullptr;
  const bool close_think = rules.chat_template != nullptr && rules.chat_template->prompt_opens_think();
  std::vector<constrain::FramedSchema> alternatives;
  std::vector<size_t> tool_index;
  for (size_t i = 0; i < request.tools.size(); ++i) {
    const nlohmann::ordered_json& function = request.tools[i]["function"];
    const std::string name = function["name"].get<std::string>();
    if (request.tool_choice == ToolChoice::Named && name != request.tool_choice_name) continue;
    const auto parameters = function.find("parameters");
    constrain::FramedSchema framed;
    framed.prefix =
        std::string(close_think ? "\n</think>\n\n" : "") + "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": ";
    framed.schema = parameters == function.end() ? nlohmann::ordered_json{{"type", "object"}} : *parameters;
    framed.suffix = "}\n</tool_call>";
    alternatives.push_back(std::move(framed));
    tool_index.push_back(i);
  }
  try {
    return constrain::framed_json_grammar(alternatives);
  } catch (const Error& e) {
    // The path of a framed grammar's error starts at the alternative: name the tool instead.
    std::string message = e.what();
    const size_t bracket = alternatives.size() == 1 ? std::string::npos : message.find("$[");
    size_t at = 0;
    if (bracket != std::string::npos) at = tool_index.at(std::stoul(message.substr(bracket + 2)));
    if (alternatives.size() == 1) at = tool_index.front();
    throw invalid_request(
        fmt::format("'tools[{}].function.parameters' cannot force a call (tool_choice): {}", at, message),
        fmt::format("tools[{}].function.parameters", at));
  }
}

std::vector<int32_t> prompt_tokens(const CompletionRequest& request, const Tokenizer& tokenizer,
                                   const PromptRules& rules) {
  bool more = false;
  return prompt_tokens_within(request, tokenizer, rules, std::numeric_limits<size_t>::max(), more);
}

SequenceSpec to_sequence_spec(const CompletionRequest& request, const Tokenizer& tokenizer, const PromptRules& rules,
                              uint64_t seed) {
  SequenceSpec spec;
  // Every message of a chat template takes tokens of its own (Qwen's at least 5: <|im_start|>role ... <|im_end|>), so
  // more messages than the context holds tokens cannot fit: refused before the template renders them all (100,000
  // messages took minutes; issue 52).
  if (request.endpoint == Endpoint::ChatCompletions && static_cast<int64_t>(request.messages.size()) > rules.context)
    throw invalid_request(fmt::format("This model's maximum context length is {} tokens, but 'messages' holds {} "
                                      "messages, each of which takes at least one token; send fewer",
                                      rules.context, request.messages.size()),
                          "messages", "context_length_exceeded");
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
  spec.grammar = request.response_grammar ? request.response_grammar : forced_tool_call_grammar(request, rules);
  if (spec.grammar && constrain::min_tokens(*spec.grammar) > spec.options.max_new_tokens) {
    const char* what = request.response_grammar ? "answer of 'response_format'" : "forced tool call";
    const int64_t shortest = constrain::min_tokens(*spec.grammar);
    // Without max_tokens the bound is the context's room (a 500 before issue 52: the engine refused the spec).
    if (!request.max_tokens)
      throw invalid_request(fmt::format("the shortest {} takes {} tokens, but the {} leaves room for {} of this "
                                        "model's maximum context length of {} tokens; shorten the {} or the schema",
                                        what, shortest, param, room, rules.context, param),
                            request.response_grammar ? "response_format" : "tools", "context_length_exceeded");
    throw invalid_request(fmt::format("'max_tokens' is {}, but the shortest {} takes {} tokens; raise max_tokens",
                                      spec.options.max_new_tokens, what, shortest),
                          "max_tokens");
  }
  return spec;
}

}  // namespace nvfp4lm::serve
