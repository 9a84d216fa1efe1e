// See openai_request.h. Fields are read in the order of the API reference; each reader names the field in its
// error, so a client sees e.g. "'temperature' must be a number between 0 and 2, got \"hot\"".
#include "serve/openai_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "core/error.h"
#include "core/json_text.h"
#include "infer/constrain/grammar_constraint.h"
#include "infer/constrain/json_schema.h"
#include "serve/api_error.h"

namespace nvfp4lm::serve {
namespace {

// Ordered: messages, tools and schemas keep the key order the client wrote (the template prints tools with tojson,
// as Python's dicts keep them; a schema's properties come in their declared order).
using ordered_json = nlohmann::ordered_json;

constexpr int kMaxTopLogprobs = 20;
constexpr size_t kMaxStopStrings = 16;
// Choices a request may ask for (n): each is a sequence of its own, taking a slot or a queue place.
constexpr int64_t kMaxChoices = 16;
constexpr size_t kMaxLogitBias = 1024;  // bounds the per-token work one request adds to every decode step
constexpr double kMaxBias = 100.0;      // OpenAI's range, [-100, 100]

// The value of `key`, or null when absent or JSON null (the clients send null for "not set").
const ordered_json* field(const ordered_json& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

[[noreturn]] void bad_type(const char* key, const char* expected, const ordered_json& value) {
  throw invalid_request(fmt::format("'{}' must be {}, got {}", key, expected, json_excerpt(value, 40)), key);
}

bool read_bool(const ordered_json& body, const char* key, bool fallback) {
  const ordered_json* value = field(body, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) bad_type(key, "true or false", *value);
  return value->get<bool>();
}

std::optional<double> read_number(const ordered_json& body, const char* key, double low, double high,
                                  const char* range_text) {
  const ordered_json* value = field(body, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) bad_type(key, fmt::format("a number {}", range_text).c_str(), *value);
  const double number = value->get<double>();
  if (!std::isfinite(number) || number < low || number > high)
    throw invalid_request(fmt::format("'{}' must be a number {}, got {}", key, range_text, json_excerpt(*value, 40)),
                          key);
  return number;
}

std::optional<int64_t> read_integer(const ordered_json& body, const char* key, int64_t low, int64_t high) {
  const ordered_json* value = field(body, key);
  if (value == nullptr) return std::nullopt;
  const bool integral = value->is_number_integer() ||
                        (value->is_number_float() && std::trunc(value->get<double>()) == value->get<double>() &&
                         std::fabs(value->get<double>()) < 9e15);
  if (!integral) bad_type(key, fmt::format("an integer from {} to {}", low, high).c_str(), *value);
  const auto number =
      value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
          ? INT64_MAX
          : (value->is_number_float() ? static_cast<int64_t>(value->get<double>()) : value->get<int64_t>());
  if (number < low || number > high)
    throw invalid_request(fmt::format("'{}' must be an integer from {} to {}, got {}", key, low, high, number), key);
  return number;
}

// A field this server cannot honour when set to anything but its neutral value.
void refuse_unless(bool neutral, const char* key, const char* why) {
  if (!neutral) throw invalid_request(fmt::format("'{}' is not supported by this server: {}", key, why), key);
}

// messages as tokenizer/chat_message.h reads them (the same reader as training data and generate --prompts).
std::vector<ChatMessage> read_messages(const ordered_json& body) {
  const ordered_json* messages = field(body, "messages");
  if (messages == nullptr)
    throw invalid_request("'messages' is required: a list of {role, content} objects", "messages");
  try {
    return read_chat_messages(*messages);
  } catch (const ChatMessageError& e) {
    throw invalid_request(e.what(), e.path());
  }
}

// prompt: text, token ids, or a list holding one of those.
void read_prompt(const ordered_json& body, CompletionRequest& request) {
  const ordered_json* prompt = field(body, "prompt");
  if (prompt == nullptr) throw invalid_request("'prompt' is required: a string or a list of token ids", "prompt");
  const ordered_json* single = prompt;
  if (prompt->is_array() && !prompt->empty() && (prompt->front().is_string() || prompt->front().is_array())) {
    if (prompt->size() != 1)
      throw invalid_request(
          fmt::format("'prompt' holds {} prompts: this server answers one prompt per request (send them separately)",
                      prompt->size()),
          "prompt");
    single = &prompt->front();
  }
  if (single->is_string()) {
    request.prompt_text = single->get<std::string>();
    return;
  }
  if (single->is_array()) {
    request.prompt_is_ids = true;
    for (const ordered_json& id : *single) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        throw invalid_request(fmt::format("'prompt' token ids must be non-negative integers, got {}", json_excerpt(id)),
                              "prompt");
      request.prompt_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    return;
  }
  bad_type("prompt", "a string or a list of token ids", *prompt);
}

std::vector<std::string> read_stop(const ordered_json& body) {
  const ordered_json* stop = field(body, "stop");
  if (stop == nullptr) return {};
  std::vector<std::string> strings;
  if (stop->is_string()) {
    strings.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    if (stop->size() > kMaxStopStrings)
      throw invalid_request(fmt::format("'stop' holds {} strings; at most {}", stop->size(), kMaxStopStrings), "stop");
    for (const ordered_json& item : *stop) {
      if (!item.is_string()) bad_type("stop", "a string or a list of strings", *stop);
      strings.push_back(item.get<std::string>());
    }
  } else {
    bad_type("stop", "a string or a list of strings", *stop);
  }
  for (const auto& text : strings)
    if (text.empty()) throw invalid_request("'stop' strings must not be empty", "stop");
  return strings;
}

void read_logprobs(const ordered_json& body, Endpoint endpoint, CompletionRequest& request) {
  if (endpoint == Endpoint::Completions) {
    if (const auto top = read_integer(body, "logprobs", 0, kMaxTopLogprobs))
      request.top_logprobs = static_cast<int>(*top);
    return;
  }
  const bool wanted = read_bool(body, "logprobs", false);
  const auto top = read_integer(body, "top_logprobs", 0, kMaxTopLogprobs);
  if (top && !wanted) throw invalid_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  if (wanted) request.top_logprobs = top ? static_cast<int>(*top) : 0;
}

// logit_bias: {"token id": bias, ...}, sorted by id. Ids are checked against the vocabulary in to_sequence_spec.
std::vector<std::pair<int32_t, float>> read_logit_bias(const ordered_json& body) {
  const ordered_json* bias = field(body, "logit_bias");
  if (bias == nullptr) return {};
  if (!bias->is_object()) bad_type("logit_bias", "an object mapping token ids to biases from -100 to 100", *bias);
  if (bias->size() > kMaxLogitBias)
    throw invalid_request(
        fmt::format("'logit_bias' has {} entries; at most {} are allowed", bias->size(), kMaxLogitBias), "logit_bias");
  std::vector<std::pair<int32_t, float>> result;
  for (const auto& [key, value] : bias->items()) {
    const std::string shown = json_excerpt(ordered_json(key), 40);
    // Decimal digits only (no sign, space or exponent), at most what an int32 holds.
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    const int64_t id = digits ? std::stoll(key) : -1;
    if (id < 0 || id > INT32_MAX)
      throw invalid_request(
          fmt::format("'logit_bias' key {} is not a token id: keys must be token ids as decimal strings, e.g. \"1234\"",
                      shown),
          "logit_bias");
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -kMaxBias ||
        value.get<double>() > kMaxBias)
      throw invalid_request(fmt::format("'logit_bias' value for token {} must be a number from -100 to 100, got {}",
                                        shown, json_excerpt(value, 40)),
                            "logit_bias");
    result.emplace_back(static_cast<int32_t>(id), static_cast<float>(value.get<double>()));
  }
  std::sort(result.begin(), result.end());
  for (size_t i = 1; i < result.size(); ++i)
    if (result[i].first == result[i - 1].first)
      throw invalid_request(
          fmt::format("'logit_bias' names token {} more than once (keys with leading zeros are the same id)",
                      result[i].first),
          "logit_bias");
  return result;
}

void read_unsupported(const ordered_json& body, Endpoint endpoint) {
  if (const auto best_of = read_integer(body, "best_of", 1, 128))
    refuse_unless(*best_of == 1, "best_of", "no ranking of choices (n gives several)");
  refuse_unless(!read_bool(body, "echo", false), "echo", "the answer does not repeat the prompt");
  refuse_unless(field(body, "suffix") == nullptr, "suffix", "no insertion mode");
  // The legacy function-calling fields (deprecated by OpenAI in favour of tools / tool_choice).
  refuse_unless(field(body, "functions") == nullptr, "functions", "use 'tools' (the legacy 'functions' is not read)");
  refuse_unless(field(body, "function_call") == nullptr, "function_call",
                "use 'tool_choice' (the legacy 'function_call' is not read)");
  if (const ordered_json* format = field(body, "response_format");
      format != nullptr && endpoint == Endpoint::Completions)
    refuse_unless(format->is_object() && format->value("type", "") == "text", "response_format",
                  "structured answers are for /v1/chat/completions");
  if (endpoint == Endpoint::ChatCompletions) {
    if (const ordered_json* modalities = field(body, "modalities"))
      refuse_unless(*modalities == ordered_json::array({"text"}), "modalities", "text only");
  }
}

// tools, tool_choice, parallel_tool_calls (chat only).
//
// tool_choice "none": the tools are still rendered into the prompt and the answer is never read for calls (vLLM's
// default): the prompt stays the one the conversation's earlier turns were rendered with, and a `<tool_call>` the
// model writes anyway is plain content, so the answer never carries tool_calls, as OpenAI promises for "none".
void read_tools(const ordered_json& body, CompletionRequest& request) {
  const ordered_json* tools = field(body, "tools");
  if (tools != nullptr && !(tools->is_array() && tools->empty())) {
    try {
      check_chat_tools(*tools);
    } catch (const ChatMessageError& e) {
      throw invalid_request(e.what(), e.path());
    }
    request.tools = *tools;
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string& name = (*tools)[i]["function"]["name"].get_ref<const std::string&>();
      // OpenAI's rule for a function's name (its API reference: "Must be a-z, A-Z, 0-9, or contain underscores and
      // dashes, with a maximum length of 64"). A forced call writes the name into the grammar's fixed prefix, and the
      // parser reads it back from the answer, so a quote, backslash or newline there broke the call (issue 52).
      const bool valid =
          name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
          });
      if (!valid)
        throw invalid_request(fmt::format("tools[{}].function.name {} must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'", i,
                                          json_excerpt((*tools)[i]["function"]["name"], 60)),
                              fmt::format("tools[{}].function.name", i));
      request.tool_names.push_back(name);
    }
  }
  request.parallel_tool_calls = read_bool(body, "parallel_tool_calls", true);
  const ordered_json* choice = field(body, "tool_choice");
  const bool has_tools = !request.tool_names.empty();
  request.tool_choice = has_tools ? ToolChoice::Auto : ToolChoice::None;
  if (choice == nullptr) return;
  constexpr const char* kChoices =
      "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (choice->is_string()) {
    const std::string name = choice->get<std::string>();
    if (name == "none") {
      request.tool_choice = ToolChoice::None;
    } else if (name == "auto" || name == "required") {
      if (!has_tools)
        throw invalid_request(fmt::format("'tool_choice' is \"{}\" but the request has no 'tools'", name),
                              "tool_choice");
      request.tool_choice = name == "auto" ? ToolChoice::Auto : ToolChoice::Required;
    } else {
      throw invalid_request(fmt::format("'tool_choice' must be {}, got {}", kChoices, json_excerpt(*choice, 40)),
                            "tool_choice");
    }
    return;
  }
  const ordered_json* function = choice->is_object() ? field(*choice, "function") : nullptr;
  const ordered_json* name = function != nullptr && function->is_object() ? field(*function, "name") : nullptr;
  if (name == nullptr || !name->is_string() || choice->value("type", "function") != "function")
    throw invalid_request(fmt::format("'tool_choice' must be {}, got {}", kChoices, json_excerpt(*choice, 40)),
                          "tool_choice");
  request.tool_choice_name = name->get<std::string>();
  if (std::find(request.tool_names.begin(), request.tool_names.end(), request.tool_choice_name) ==
      request.tool_names.end())
    throw invalid_request(
        fmt::format("'tool_choice' names the function {}, which is not in 'tools'", json_excerpt(*name, 60)),
        "tool_choice.function.name");
  request.tool_choice = ToolChoice::Named;
}

// The name of a json_schema response format: what OpenAI allows.
bool valid_schema_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// response_format: null / "text" (no constraint), "json_object", or "json_schema" with its schema compiled here, once
// per request (the n choices share the grammar).
std::shared_ptr<const constrain::Grammar> read_response_format(const ordered_json& body) {
  const ordered_json* format = field(body, "response_format");
  if (format == nullptr) return nullptr;
  if (!format->is_object()) bad_type("response_format", "an object such as {\"type\": \"json_object\"}", *format);
  const ordered_json* type = field(*format, "type");
  if (type == nullptr || !type->is_string())
    throw invalid_request("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"",
                          "response_format.type");
  const std::string name = type->get<std::string>();
  if (name == "text") return nullptr;
  if (name == "json_object") return constrain::json_object_grammar();
  if (name != "json_schema")
    throw invalid_request(fmt::format("'response_format.type' is {}: use \"text\", \"json_object\" or \"json_schema\"",
                                      json_excerpt(*type, 40)),
                          "response_format.type");
  const ordered_json* spec = field(*format, "json_schema");
  if (spec == nullptr || !spec->is_object())
    throw invalid_request(
        "'response_format.json_schema' is required with type json_schema: an object with name and "
        "schema",
        "response_format.json_schema");
  const ordered_json* schema_name = field(*spec, "name");
  if (schema_name == nullptr || !schema_name->is_string() || !valid_schema_name(schema_name->get<std::string>()))
    throw invalid_request("'response_format.json_schema.name' must be 1 to 64 letters, digits, '_' or '-'",
                          "response_format.json_schema.name");
  read_bool(*spec, "strict", false);  // type-checked only: the schema is always enforced
  const ordered_json* schema = field(*spec, "schema");
  try {
    return constrain::json_schema_grammar(schema == nullptr ? ordered_json(true) : *schema);
  } catch (const Error& e) {
    throw invalid_request(fmt::format("'response_format.json_schema.schema' cannot be used: {}", e.what()),
                          "response_format.json_schema.schema");
  }
}

// The fields the API defines: both endpoints', then each one's own.
// clang-format off
constexpr std::string_view kCommonFields[] = {
    "model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
    "seed", "stop", "n", "logprobs", "presence_penalty", "frequency_penalty", "logit_bias", "user"};
constexpr std::string_view kChatFields[] = {
    "messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "functions", "function_call",
    "parallel_tool_calls", "response_format", "metadata", "store", "service_tier", "modalities", "chat_template_kwargs"};
constexpr std::string_view kCompletionFields[] = {"prompt", "best_of", "echo", "suffix"};
// clang-format on

bool known_field(Endpoint endpoint, std::string_view key) {
  auto in = [&](const auto& fields) {
    return std::find(std::begin(fields), std::end(fields), key) != std::end(fields);
  };
  return in(kCommonFields) || (endpoint == Endpoint::ChatCompletions ? in(kChatFields) : in(kCompletionFields));
}

}  // namespace

const char* endpoint_path(Endpoint endpoint) {
  return endpoint == Endpoint::ChatCompletions ? "/v1/chat/completions" : "/v1/completions";
}

CompletionRequest parse_completion_request(const ordered_json& body, Endpoint endpoint,
                                           const RequestDefaults& defaults) {
  if (!body.is_object())
    throw invalid_request(fmt::format("the request body must be a JSON object, got {}", json_excerpt(body, 40)));
  CompletionRequest request;
  request.endpoint = endpoint;
  for (const auto& [key, value] : body.items())
    if (!known_field(endpoint, key)) request.ignored.push_back(key);

  if (const ordered_json* model = field(body, "model")) {
    if (!model->is_string()) bad_type("model", "a string", *model);
    request.model = model->get<std::string>();
  }
  if (endpoint == Endpoint::ChatCompletions) {
    request.messages = read_messages(body);
  } else {
    read_prompt(body, request);
  }
  request.stream = read_bool(body, "stream", false);
  if (const ordered_json* options = field(body, "stream_options")) {
    if (!options->is_object()) bad_type("stream_options", "an object", *options);
    if (!request.stream)
      throw invalid_request("'stream_options' is only allowed with 'stream': true", "stream_options");
    request.include_usage = read_bool(*options, "include_usage", false);
  }
  constexpr int64_t kMaxTokens = int64_t{1} << 30;
  request.max_tokens = read_integer(body, "max_tokens", 1, kMaxTokens);
  if (const auto max_completion = read_integer(body, "max_completion_tokens", 1, kMaxTokens))
    request.max_tokens = max_completion;

  SamplingOptions& sampling = request.sampling;
  sampling = defaults.sampling;
  if (const auto value = read_number(body, "temperature", 0.0, 2.0, "from 0 to 2"))
    sampling.temperature = static_cast<float>(*value);
  if (const auto value = read_number(body, "top_p", 0.0, 1.0, "in (0, 1]")) {
    if (*value == 0.0) throw invalid_request("'top_p' must be a number in (0, 1], got 0", "top_p");
    sampling.top_p = static_cast<float>(*value);
  }
  if (const auto value = read_integer(body, "top_k", -1, INT32_MAX)) sampling.top_k = *value < 0 ? 0 : *value;
  if (const auto value = read_number(body, "min_p", 0.0, 1.0, "in [0, 1)")) {
    if (*value == 1.0) throw invalid_request("'min_p' must be a number in [0, 1), got 1", "min_p");
    sampling.min_p = static_cast<float>(*value);
  }
  if (const auto value = read_number(body, "repetition_penalty", 1e-4, 1e4, "from 0.0001 to 10000"))
    sampling.repetition_penalty = static_cast<float>(*value);
  if (const auto value = read_number(body, "presence_penalty", -2.0, 2.0, "from -2 to 2"))
    sampling.presence_penalty = static_cast<float>(*value);
  if (const auto value = read_number(body, "frequency_penalty", -2.0, 2.0, "from -2 to 2"))
    sampling.frequency_penalty = static_cast<float>(*value);
  sampling.logit_bias = read_logit_bias(body);
  if (const auto seed = read_integer(body, "seed", std::numeric_limits<int64_t>::min(), INT64_MAX))
    request.seed = static_cast<uint64_t>(*seed);
  request.stop = read_stop(body);
  read_logprobs(body, endpoint, request);
  if (const auto n = read_integer(body, "n", 1, kMaxChoices)) request.n = static_cast<int>(*n);
  read_unsupported(body, endpoint);
  if (endpoint == Endpoint::ChatCompletions) {
    if (const ordered_json* kwargs = field(body, "chat_template_kwargs")) {
      if (!kwargs->is_object()) bad_type("chat_template_kwargs", "an object", *kwargs);
      if (kwargs->contains("enable_thinking")) request.enable_thinking = read_bool(*kwargs, "enable_thinking", true);
      request.chat_template_kwargs = *kwargs;
    }
    read_tools(body, request);
    request.response_grammar = read_response_format(body);
    if (request.response_grammar &&
        (request.tool_choice == ToolChoice::Required || request.tool_choice == ToolChoice::Named))
      throw invalid_request("'response_format' and a 'tool_choice' that forces a call cannot both shape the answer",
                            "response_format");
    if (request.response_grammar && request.max_tokens &&
        constrain::min_tokens(*request.response_grammar) > *request.max_tokens)
      throw invalid_request(fmt::format("'max_tokens' is {}, but the shortest answer of 'response_format' takes {} "
                                        "tokens; raise max_tokens",
                                        *request.max_tokens, constrain::min_tokens(*request.response_grammar)),
                            "max_tokens");
  }
  return request;
}

}  // namespace nvfp4lm::serve
