// See openai_response.h.
#include "serve/openai_response.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "core/json_text.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm::serve {
namespace {

using nlohmann::json;

// The API's stand-in for a log-probability of -inf (JSON has no infinities).
constexpr double kLowestLogprob = -9999.0;

double finite_logprob(double value) { return std::isfinite(value) ? value : kLowestLogprob; }

std::string sse(const json& data) { return "data: " + to_json_text(data) + "\n\n"; }

// Code points in valid UTF-8 text: the bytes that do not continue a character.
int64_t code_points(std::string_view text) {
  return std::count_if(text.begin(), text.end(),
                       [](char byte) { return (static_cast<unsigned char>(byte) & 0xC0) != 0x80; });
}

// OpenAI's call ids: "call_" and 24 letters and digits.
std::string tool_call_id() {
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[random() % kAlphabet.size()];
  return id;
}

}  // namespace

const char* finish_reason(StopReason reason) {
  switch (reason) {
    case StopReason::EndOfSequence:
    case StopReason::StopString:
      return "stop";
    case StopReason::MaxTokens:
    case StopReason::ContextFull:
      return "length";
  }
  return "length";
}

CompletionResponse::CompletionResponse(const CompletionRequest& request, const Tokenizer& tokenizer, std::string id,
                                       int64_t created, std::string model, const AnswerParsing& parsing)
    : chat_(request.endpoint == Endpoint::ChatCompletions),
      stream_(request.stream),
      include_usage_(request.include_usage),
      top_logprobs_(request.top_logprobs),
      tokenizer_(tokenizer),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      choices_(static_cast<size_t>(std::max(1, request.n))) {
  if (top_logprobs_ >= 0)
    for (Choice& choice : choices_)
      choice.logprobs = chat_ ? json{{"content", json::array()}}
                              : json{{"tokens", json::array()},
                                     {"token_logprobs", json::array()},
                                     {"top_logprobs", json::array()},
                                     {"text_offset", json::array()}};
  if (chat_)
    for (Choice& choice : choices_) {
      if (parsing.reasoning) choice.reasoning_parser.emplace(parsing.starts_in_reasoning);
      if (!parsing.tool_names.empty()) choice.tool_parser.emplace(parsing.tool_names, parsing.max_tool_calls);
    }
}

CompletionResponse::Parsed CompletionResponse::parse(Choice& state, const std::string& text, bool finished) {
  Parsed parsed;
  std::string content = text;
  if (state.reasoning_parser) {
    ReasoningOutput out = state.reasoning_parser->feed(text);
    if (finished) {
      ReasoningOutput last = state.reasoning_parser->finish();
      out.reasoning += last.reasoning;
      out.content += last.content;
    }
    parsed.reasoning = std::move(out.reasoning);
    content = std::move(out.content);
  }
  if (state.tool_parser) {
    ToolCallOutput out = state.tool_parser->feed(content);
    if (finished) {
      ToolCallOutput last = state.tool_parser->finish();
      out.content += last.content;
      for (ToolCall& call : last.calls) out.calls.push_back(std::move(call));
    }
    content = std::move(out.content);
    for (const ToolCall& call : out.calls)
      parsed.calls.push_back({{"index", state.tool_calls.size() + parsed.calls.size()},
                              {"id", tool_call_id()},
                              {"type", "function"},
                              {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  parsed.content = std::move(content);
  state.reasoning += parsed.reasoning;
  state.content += parsed.content;
  for (const json& call : parsed.calls) {
    json entry = call;
    entry.erase("index");
    state.tool_calls.push_back(std::move(entry));
  }
  return parsed;
}

bool CompletionResponse::finished() const {
  return std::all_of(choices_.begin(), choices_.end(), [](const Choice& choice) { return choice.finished; });
}

int64_t CompletionResponse::completion_tokens() const {
  int64_t tokens = 0;
  for (const Choice& choice : choices_) tokens += choice.completion_tokens;
  return tokens;
}

json CompletionResponse::chunk(json choice) const {
  json object = {{"id", id_},
                 {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                 {"created", created_},
                 {"model", model_},
                 {"choices", json::array({std::move(choice)})}};
  return object;
}

json CompletionResponse::usage() const {
  const int64_t completion = completion_tokens();
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion},
          {"total_tokens", prompt_tokens_ + completion}};
}

json CompletionResponse::chat_logprob(const NextTokenLogprobs& logprobs) const {
  auto entry = [&](const TokenLogprob& token) {
    const std::string_view bytes = tokenizer_.token_bytes(token.id);
    json byte_values = json::array();
    for (unsigned char byte : bytes) byte_values.push_back(static_cast<int>(byte));
    return json{{"token", tokenizer::to_valid_utf8(bytes)},
                {"logprob", finite_logprob(token.logprob)},
                {"bytes", std::move(byte_values)}};
  };
  json result = entry(logprobs.chosen);
  json top = json::array();
  for (const TokenLogprob& alternative : logprobs.top) top.push_back(entry(alternative));
  result["top_logprobs"] = std::move(top);
  return result;
}

void CompletionResponse::add_completion_logprob(const NextTokenLogprobs& logprobs, int64_t offset, json& target) const {
  target["tokens"].push_back(tokenizer::to_valid_utf8(tokenizer_.token_bytes(logprobs.chosen.id)));
  target["token_logprobs"].push_back(finite_logprob(logprobs.chosen.logprob));
  json top = json::object();
  for (const TokenLogprob& alternative : logprobs.top)
    top[tokenizer::to_valid_utf8(tokenizer_.token_bytes(alternative.id))] = finite_logprob(alternative.logprob);
  target["top_logprobs"].push_back(std::move(top));
  target["text_offset"].push_back(offset);
}

std::string CompletionResponse::add(const SequenceEvent& event, int index) {
  Choice& state = choices_.at(static_cast<size_t>(index));
  prompt_tokens_ = event.prompt_tokens;
  state.completion_tokens = event.generated_tokens;
  // The token's text offset: the characters of the answer before the text this token made final.
  const int64_t offset = state.text_chars;
  state.text += event.text;
  state.text_chars += code_points(event.text);
  Parsed parsed;
  if (chat_) parsed = parse(state, event.text, event.finished);
  if (event.finished) {
    state.finished = true;
    state.finish_reason = finish_reason(event.stop_reason);
    // The answer made calls and ended by itself (not cut by max_tokens).
    if (!state.tool_calls.empty() && state.finish_reason == std::string("stop")) state.finish_reason = "tool_calls";
  }
  if (!stream_) {
    if (event.logprobs) {
      if (chat_) {
        state.logprobs["content"].push_back(chat_logprob(*event.logprobs));
      } else {
        add_completion_logprob(*event.logprobs, offset, state.logprobs);
      }
    }
    return {};
  }

  std::string out;
  if (chat_ && !state.started)
    out += sse(chunk({{"index", index},
                      {"delta", {{"role", "assistant"}, {"content", ""}}},
                      {"logprobs", nullptr},
                      {"finish_reason", nullptr}}));
  state.started = true;
  json logprobs = nullptr;
  if (event.logprobs) {
    if (chat_) {
      logprobs = {{"content", json::array({chat_logprob(*event.logprobs)})}};
    } else {
      logprobs = {{"tokens", json::array()},
                  {"token_logprobs", json::array()},
                  {"top_logprobs", json::array()},
                  {"text_offset", json::array()}};
      add_completion_logprob(*event.logprobs, offset, logprobs);
    }
  }
  if (chat_) {
    // One chunk per part, in the answer's order; the token's logprobs on the first of them.
    std::vector<json> deltas;
    if (!parsed.reasoning.empty()) deltas.push_back({{"reasoning_content", parsed.reasoning}});
    if (!parsed.content.empty()) deltas.push_back({{"content", parsed.content}});
    for (json& call : parsed.calls) deltas.push_back({{"tool_calls", json::array({std::move(call)})}});
    if (deltas.empty() && event.logprobs) deltas.push_back({{"content", ""}});
    for (json& delta : deltas) {
      out += sse(chunk({{"index", index},
                        {"delta", std::move(delta)},
                        {"logprobs", std::exchange(logprobs, nullptr)},
                        {"finish_reason", nullptr}}));
    }
  } else if (!event.text.empty() || event.logprobs) {
    json choice = {{"index", index}, {"logprobs", std::move(logprobs)}, {"finish_reason", nullptr}};
    choice["text"] = event.text;
    out += sse(chunk(std::move(choice)));
  }
  if (event.finished) {
    json choice = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", state.finish_reason}};
    if (chat_) {
      choice["delta"] = json::object();
    } else {
      choice["text"] = "";
    }
    out += sse(chunk(std::move(choice)));
  }
  return out;
}

std::string CompletionResponse::stream_end() const {
  std::string out;
  if (include_usage_) {
    json last = chunk(json());
    last["choices"] = json::array();
    last["usage"] = usage();
    out += sse(last);
  }
  return out + "data: [DONE]\n\n";
}

std::string CompletionResponse::stream_error(const ApiError& error) { return sse(error.body()) + "data: [DONE]\n\n"; }

json CompletionResponse::body() const {
  json choices = json::array();
  for (size_t index = 0; index < choices_.size(); ++index) {
    const Choice& state = choices_[index];
    json choice = {{"index", index},
                   {"logprobs", top_logprobs_ >= 0 ? state.logprobs : json(nullptr)},
                   {"finish_reason", state.finish_reason}};
    if (chat_) {
      json message = {{"role", "assistant"}};
      message["content"] = state.content.empty() && !state.tool_calls.empty() ? json(nullptr) : json(state.content);
      if (!state.reasoning.empty()) message["reasoning_content"] = state.reasoning;
      if (!state.tool_calls.empty()) message["tool_calls"] = state.tool_calls;
      choice["message"] = std::move(message);
    } else {
      choice["text"] = state.text;
    }
    choices.push_back(std::move(choice));
  }
  return {{"id", id_},
          {"object", chat_ ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", std::move(choices)},
          {"usage", usage()}};
}

}  // namespace nvfp4lm::serve
