// The answer read back for a chat with tools on a thinking template (serve/openai_response.h with AnswerParsing):
// reasoning_content, content and tool_calls, the same whether the body is built at the end or streamed, and the
// finish_reason "tool_calls" only when the answer stopped by itself after a call.
#include <gtest/gtest.h>

#include "serve/openai_response.h"
#include "serve_test_util.h"

namespace nvfp4lm::test::test_openai_response_tools {
namespace {

using nlohmann::json;

const std::vector<std::string> kPieces = {"<think>",
                                          "\nThe user wants",
                                          " weather.\n",
                                          "</think>\n\n",
                                          "Checking",
                                          ".\n<tool",
                                          "_call>\n{\"name\": \"get_weather\", ",
                                          "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"};

struct Answer {
  json body;              // stream = false
  std::string reasoning;  // stream = true, accumulated
  std::string content;
  json calls = json::array();
  std::string finish_reason;
};

Answer answer(bool stream, StopReason stop) {
  serve::CompletionRequest request;
  request.stream = stream;
  serve::AnswerParsing parsing;
  parsing.reasoning = true;
  parsing.tool_names = {"get_weather"};
  serve::CompletionResponse response(request, tiny_serve_tokenizer(), "chatcmpl-1", 0, "m", parsing);
  std::string sse;
  for (size_t i = 0; i < kPieces.size(); ++i) {
    SequenceEvent event;
    event.token = 0;
    event.text = kPieces[i];
    event.prompt_tokens = 5;
    event.generated_tokens = static_cast<int64_t>(i) + 1;
    event.finished = i + 1 == kPieces.size();
    event.stop_reason = stop;
    sse += response.add(event);
  }
  Answer result;
  if (!stream) {
    result.body = response.body();
    return result;
  }
  for (const std::string& data : sse_data(sse)) {
    if (data == "[DONE]") continue;
    const json choice = json::parse(data)["choices"][0];
    const json& delta = choice["delta"];
    result.reasoning += delta.value("reasoning_content", "");
    result.content += delta.value("content", "");
    if (delta.contains("tool_calls"))
      for (const json& call : delta["tool_calls"]) result.calls.push_back(call);
    if (!choice["finish_reason"].is_null()) result.finish_reason = choice["finish_reason"];
  }
  return result;
}

TEST(OpenAiResponseTools, ReasoningContentAndToolCallsStreamedOrNot) {
  const json message = answer(false, StopReason::EndOfSequence).body["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "The user wants weather.");
  EXPECT_EQ(message["content"], "Checking.");
  ASSERT_EQ(message["tool_calls"].size(), 1u) << message.dump();
  const json& call = message["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["id"].get<std::string>().size(), 29u);
  EXPECT_EQ(answer(false, StopReason::EndOfSequence).body["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(answer(false, StopReason::MaxTokens).body["choices"][0]["finish_reason"], "length");

  const Answer streamed = answer(true, StopReason::EndOfSequence);
  EXPECT_EQ(streamed.reasoning, "The user wants weather.");
  EXPECT_EQ(streamed.content, "Checking.");
  ASSERT_EQ(streamed.calls.size(), 1u);
  EXPECT_EQ(streamed.calls[0]["index"], 0);
  EXPECT_EQ(streamed.calls[0]["function"], call["function"]);
  EXPECT_EQ(streamed.finish_reason, "tool_calls");
}

TEST(OpenAiResponseTools, WithoutParsingTheTextIsContent) {
  serve::CompletionRequest request;
  serve::CompletionResponse response(request, tiny_serve_tokenizer(), "chatcmpl-1", 0, "m");
  SequenceEvent event;
  event.text = "<think>x</think><tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
  event.generated_tokens = 1;
  event.finished = true;
  event.stop_reason = StopReason::EndOfSequence;
  response.add(event);
  const json choice = response.body()["choices"][0];
  EXPECT_EQ(choice["message"]["content"], event.text);
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  EXPECT_FALSE(choice["message"].contains("reasoning_content"));
  EXPECT_EQ(choice["finish_reason"], "stop");
}

}  // namespace
}  // namespace nvfp4lm::test::test_openai_response_tools
