// See openai_response.h.
#include "serve/openai_response.h"

#include <algorithm>
#include <cmath>

#include "core/json_text.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm::serve {
namespace {

using nlohmann::json;

// The API's stand-in for a log-probability of -inf (JSON has no infinities).
constexpr double kLowestLogprob = -9999.0;

double finite_logprob(double value) { return std::isfinite(value) ? value : kLowestLogprob; }

std::string sse(const json& data) { return "data: " + to_json_text(data) + "\n\n"; }

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
                                       int64_t created, std::string model)
    : chat_(request.endpoint == Endpoint::ChatCompletions),
      stream_(request.stream),
      include_usage_(request.include_usage),
      top_logprobs_(request.top_logprobs),
      tokenizer_(tokenizer),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)) {
  if (top_logprobs_ >= 0)
    logprobs_ = chat_ ? json{{"content", json::array()}}
                      : json{{"tokens", json::array()},
                             {"token_logprobs", json::array()},
                             {"top_logprobs", json::array()},
                             {"text_offset", json::array()}};
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
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion_tokens_},
          {"total_tokens", prompt_tokens_ + completion_tokens_}};
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

void CompletionResponse::add_completion_logprob(const NextTokenLogprobs& logprobs, json& target) const {
  const std::string token = tokenizer::to_valid_utf8(tokenizer_.token_bytes(logprobs.chosen.id));
  int64_t offset = 0;
  if (!target["text_offset"].empty())
    offset = target["text_offset"].back().get<int64_t>() +
             static_cast<int64_t>(target["tokens"].back().get_ref<const std::string&>().size());
  target["tokens"].push_back(token);
  target["token_logprobs"].push_back(finite_logprob(logprobs.chosen.logprob));
  json top = json::object();
  for (const TokenLogprob& alternative : logprobs.top)
    top[tokenizer::to_valid_utf8(tokenizer_.token_bytes(alternative.id))] = finite_logprob(alternative.logprob);
  target["top_logprobs"].push_back(std::move(top));
  target["text_offset"].push_back(offset);
}

std::string CompletionResponse::add(const SequenceEvent& event) {
  prompt_tokens_ = event.prompt_tokens;
  completion_tokens_ = event.generated_tokens;
  text_ += event.text;
  if (event.finished) {
    finished_ = true;
    finish_reason_ = finish_reason(event.stop_reason);
  }
  if (!stream_) {
    if (event.logprobs) {
      if (chat_) {
        logprobs_["content"].push_back(chat_logprob(*event.logprobs));
      } else {
        add_completion_logprob(*event.logprobs, logprobs_);
      }
    }
    return {};
  }

  std::string out;
  if (chat_ && !started_)
    out += sse(chunk({{"index", 0},
                      {"delta", {{"role", "assistant"}, {"content", ""}}},
                      {"logprobs", nullptr},
                      {"finish_reason", nullptr}}));
  started_ = true;
  if (!event.text.empty() || event.logprobs) {
    json logprobs = nullptr;
    if (event.logprobs) {
      if (chat_) {
        logprobs = {{"content", json::array({chat_logprob(*event.logprobs)})}};
      } else {
        // Offsets continue from the text before this chunk.
        json position = {{"tokens", json::array()},
                         {"token_logprobs", json::array()},
                         {"top_logprobs", json::array()},
                         {"text_offset", json::array()}};
        add_completion_logprob(*event.logprobs, position);
        position["text_offset"][0] = static_cast<int64_t>(text_.size() - event.text.size());
        logprobs = std::move(position);
      }
    }
    json choice = {{"index", 0}, {"logprobs", std::move(logprobs)}, {"finish_reason", nullptr}};
    if (chat_) {
      choice["delta"] = {{"content", event.text}};
    } else {
      choice["text"] = event.text;
    }
    out += sse(chunk(std::move(choice)));
  }
  if (event.finished) {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason_}};
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
  json choice = {
      {"index", 0}, {"logprobs", top_logprobs_ >= 0 ? logprobs_ : json(nullptr)}, {"finish_reason", finish_reason_}};
  if (chat_) {
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
  } else {
    choice["text"] = text_;
  }
  return {{"id", id_},
          {"object", chat_ ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", json::array({std::move(choice)})},
          {"usage", usage()}};
}

}  // namespace nvfp4lm::serve
