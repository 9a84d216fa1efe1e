// The OpenAI server (serve/server.h) over loopback HTTP with the tiny model: models, health and metrics; greedy chat
// and completions equal Generator's answer token for token (streamed or not); every kind of bad request gets its
// OpenAI error object and status (malformed JSON, a huge body, a prompt over the context, unknown fields — ignored —,
// an unknown model, a bad API key, unsupported options, a full queue); a client that disconnects mid-stream is
// cancelled, its slot freed, and the server keeps serving with its memory back at the idle level; shutdown cancels
// what runs past the deadline with an error event.
#include <gtest/gtest.h>

#include "infer/generator.h"
#include "infer/prompt_batch.h"
#include "infer/qwen3_cached_lm.h"
#include "infer/stop_conditions.h"
#include "serve_test_util.h"
#include "tokenizer/chat.h"

namespace nvfp4lm::test::test_serve_http {
namespace {

using nlohmann::json;

// Generator's greedy answer to `prompt_ids` (the reference every server answer must equal).
GenerationResult greedy_alone(const std::vector<int32_t>& prompt_ids, int64_t max_tokens) {
  const Qwen3Model& model = tiny_serve_model();
  Qwen3CachedLm lm(model, 256);
  GenerationOptions options;
  options.max_new_tokens = max_tokens;
  options.sampling.temperature = 0;
  options.token_choice = TokenChoicePlace::Host;
  options.eos_ids = end_of_sequence_ids(model.config(), find_generation_config(model.source()), tiny_serve_tokenizer(),
                                        model.config().vocab_size);
  Generator generator(lm, tiny_serve_tokenizer(), options);
  return generator.generate(prompt_ids);
}

std::vector<int32_t> chat_prompt(const std::string& question) {
  PromptFormat format;
  format.chat_template = ChatTemplate::resolve(tiny_serve_tokenizer());
  return encode_prompt(tiny_serve_tokenizer(), question, format);
}

void expect_error(const HttpResult& result, int status, const std::string& part, const std::string& what) {
  EXPECT_EQ(result.status, status) << what << ": " << result.body;
  json body;
  ASSERT_NO_THROW(body = result.json()) << what << ": " << result.body;
  ASSERT_TRUE(body.contains("error")) << what << ": " << result.body;
  const std::string message = body["error"].value("message", "");
  EXPECT_NE(message.find(part), std::string::npos) << what << ": '" << part << "' not in " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << what << ": " << message;
  EXPECT_TRUE(body["error"].contains("type") && body["error"].contains("param") && body["error"].contains("code"))
      << what;
}

TEST(ServeHttp, ModelsHealthAndMetrics) {
  TestServer server;
  serve::HttpClient client = server.client();
  const HttpResult models = get(client, "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.json()["data"][0]["id"], kServedName);
  EXPECT_EQ(models.json()["data"][0]["max_model_len"], 256);
  EXPECT_EQ(get(client, std::string("/v1/models/") + kServedName).status, 200);
  expect_error(get(client, "/v1/models/other"), 404, "'other' does not exist", "unknown model id");
  const HttpResult health = get(client, "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.json()["status"], "ok");
  const HttpResult metrics = get(client, "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metric(metrics.body, "nvfp4lm_kv_slots"), 8);
  EXPECT_EQ(metric(metrics.body, "nvfp4lm_requests_running"), 0);
  EXPECT_NE(metrics.body.find("# TYPE nvfp4lm_decode_step_seconds histogram"), std::string::npos);
  expect_error(get(client, "/v2/nothing"), 404, "no route for GET /v2/nothing", "unknown route");
}

TEST(ServeHttp, APortInUseIsAOneLineError) {
  TestServer server;
  serve::ServeOptions options;
  options.http.port = server.port();
  options.context = 64;
  test::expect_error([&] { serve::Server second(tiny_serve_model(), tiny_serve_tokenizer(), options); },
                     {"cannot listen on 127.0.0.1:" + std::to_string(server.port()), "--port"});
}

TEST(ServeHttp, GreedyChatEqualsGeneratorStreamedOrNot) {
  TestServer server;
  serve::HttpClient client = server.client();
  const std::string question = "Name three colours.";
  const GenerationResult expected = greedy_alone(chat_prompt(question), 12);

  const HttpResult plain = post_json(client, "/v1/chat/completions", chat_body(question, 12).dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json answer = plain.json();
  EXPECT_EQ(answer["object"], "chat.completion");
  EXPECT_EQ(answer["model"], kServedName);
  EXPECT_EQ(answer["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(answer["choices"][0]["message"]["content"], expected.text);
  EXPECT_EQ(answer["choices"][0]["finish_reason"], expected.stop_reason == StopReason::MaxTokens ? "length" : "stop");
  EXPECT_EQ(answer["usage"]["prompt_tokens"], chat_prompt(question).size());
  EXPECT_EQ(answer["usage"]["completion_tokens"], expected.tokens.size());

  json body = chat_body(question, 12, /*stream=*/true);
  body["stream_options"] = {{"include_usage", true}};
  const HttpResult streamed = post_json(client, "/v1/chat/completions", body.dump());
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const std::vector<std::string> events = sse_data(streamed.body);
  ASSERT_GE(events.size(), 4u) << streamed.body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["id"], json::parse(events[0])["id"]);
    if (chunk["choices"].empty()) {
      EXPECT_EQ(chunk["usage"]["completion_tokens"], expected.tokens.size());  // the usage chunk
      continue;
    }
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    const json& choice = chunk["choices"][0];
    if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(text, expected.text);
  EXPECT_EQ(finish, answer["choices"][0]["finish_reason"]);
}

TEST(ServeHttp, CompletionsWithTextAndTokenIdsEqualGenerator) {
  TestServer server;
  serve::HttpClient client = server.client();
  const std::vector<int32_t> ids = tiny_serve_tokenizer().encode("Once upon a time");
  const GenerationResult expected = greedy_alone(ids, 9);
  for (const json& prompt : {json("Once upon a time"), json(ids), json::array({json(ids)})}) {
    const json body = {{"model", kServedName}, {"prompt", prompt}, {"max_tokens", 9}, {"temperature", 0}};
    const HttpResult result = post_json(client, "/v1/completions", body.dump());
    ASSERT_EQ(result.status, 200) << result.body;
    EXPECT_EQ(result.json()["object"], "text_completion");
    EXPECT_EQ(result.json()["choices"][0]["text"], expected.text) << prompt.dump();
    EXPECT_EQ(result.json()["usage"]["completion_tokens"], expected.tokens.size());
  }
  // Without max_tokens a completion gets 16 tokens, as in the OpenAI API.
  const HttpResult fallback = post_json(client, "/v1/completions", json{{"prompt", "Once"}, {"temperature", 0}}.dump());
  ASSERT_EQ(fallback.status, 200);
  EXPECT_LE(fallback.json()["usage"]["completion_tokens"].get<int>(), 16);
}

TEST(ServeHttp, LogprobsHaveTheApiShape) {
  TestServer server;
  serve::HttpClient client = server.client();
  json body = chat_body("Hi", 3);
  body["logprobs"] = true;
  body["top_logprobs"] = 2;
  const HttpResult chat = post_json(client, "/v1/chat/completions", body.dump());
  ASSERT_EQ(chat.status, 200) << chat.body;
  const json chat_answer = chat.json();
  const json& content = chat_answer["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), chat_answer["usage"]["completion_tokens"].get<size_t>());
  for (const json& entry : content) {
    EXPECT_LE(entry["logprob"].get<double>(), 0.0);
    ASSERT_EQ(entry["top_logprobs"].size(), 2u);
    EXPECT_EQ(entry["top_logprobs"][0]["token"], entry["token"]);  // greedy: the chosen one is the most likely
    EXPECT_TRUE(entry["bytes"].is_array());
  }
  const json completion = {{"prompt", "Hi"}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", 1}};
  const HttpResult legacy = post_json(client, "/v1/completions", completion.dump());
  ASSERT_EQ(legacy.status, 200) << legacy.body;
  const json legacy_answer = legacy.json();
  const json& logprobs = legacy_answer["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"].size(), 3u);
  EXPECT_EQ(logprobs["token_logprobs"].size(), 3u);
  EXPECT_EQ(logprobs["top_logprobs"].size(), 3u);
  EXPECT_EQ(logprobs["text_offset"][0], 0);
}

TEST(ServeHttp, BadRequestsGetOpenAiErrors) {
  serve::ServeOptions options;
  options.context = 32;
  TestServer server(options);
  serve::HttpClient client = server.client();
  expect_error(post_json(client, "/v1/chat/completions", "{\"messages\": [}"), 400, "not valid JSON", "malformed JSON");
  expect_error(post_json(client, "/v1/chat/completions", "[1, 2]"), 400, "must be a JSON object", "not an object");
  expect_error(post_json(client, "/v1/chat/completions", std::string(9u << 20, ' ')), 413, "larger than",
               "a 9 MiB body");
  expect_error(post_json(client, "/v1/chat/completions", chat_body(std::string(200, 'x'), 4).dump()), 400,
               "maximum context length is 32 tokens", "prompt over the context");
  expect_error(post_json(client, "/v1/chat/completions", chat_body("Hi", 30).dump()), 400, "reduce max_tokens",
               "prompt + max_tokens over the context");
  json unknown_model = chat_body("Hi", 2);
  unknown_model["model"] = "gpt-9";
  expect_error(post_json(client, "/v1/chat/completions", unknown_model.dump()), 404, "\"gpt-9\" does not exist",
               "unknown model");
  // A 1 MB name is quoted in about 80 characters, not echoed whole (issue 52).
  unknown_model["model"] = std::string(1 << 20, 'm');
  const HttpResult long_name = post_json(client, "/v1/chat/completions", unknown_model.dump());
  EXPECT_EQ(long_name.status, 404);
  EXPECT_LT(long_name.body.size(), 1000u) << long_name.body.substr(0, 200);
  EXPECT_NE(long_name.body.find("(1048576 bytes)"), std::string::npos) << long_name.body.substr(0, 300);
  json two = chat_body("Hi", 2);
  two["n"] = 17;
  expect_error(post_json(client, "/v1/chat/completions", two.dump()), 400, "from 1 to 16", "n = 17");
  json hot = chat_body("Hi", 2);
  hot["temperature"] = "hot";
  expect_error(post_json(client, "/v1/chat/completions", hot.dump()), 400, "'temperature' must be a number", "type");
  json tools = chat_body("Hi", 2);
  tools["tools"] = json::array({{{"type", "function"}}});
  const HttpResult bad_tools = post_json(client, "/v1/chat/completions", tools.dump());
  expect_error(bad_tools, 400, "tools[0].function is missing", "tools");
  EXPECT_EQ(bad_tools.json()["error"]["param"], "tools[0].function");
  expect_error(post_json(client, "/v1/chat/completions", json{{"messages", json::array()}}.dump()), 400,
               "non-empty list", "no messages");
  expect_error(post_json(client, "/v1/completions", json{{"prompt", {"a", "b"}}}.dump()), 400, "one prompt",
               "two prompts");
  expect_error(post_json(client, "/v1/completions", json{{"prompt", {1, 999999}}}.dump()), 400,
               "outside the vocabulary", "token id");
  // Unknown fields are ignored (as vLLM and llama.cpp's server do): the request is answered.
  json extra = chat_body("Hi", 2);
  extra["some_future_field"] = {{"x", 1}};
  EXPECT_EQ(post_json(client, "/v1/chat/completions", extra.dump()).status, 200);
  // After all that, the server still answers.
  EXPECT_EQ(post_json(client, "/v1/chat/completions", chat_body("Hi", 2).dump()).status, 200);
}

TEST(ServeHttp, ApiKeyGuardsTheApiOnly) {
  serve::ServeOptions options;
  options.http.api_key = "sekrit";
  TestServer server(options);
  expect_error(post_json(server.client(), "/v1/chat/completions", chat_body("Hi", 2).dump()), 401, "Incorrect API key",
               "no key");
  expect_error(post_json(server.client("wrong"), "/v1/chat/completions", chat_body("Hi", 2).dump()), 401,
               "Incorrect API key", "wrong key");
  expect_error(get(server.client("wrong"), "/v1/models"), 401, "Incorrect API key", "models with a wrong key");
  EXPECT_EQ(post_json(server.client("sekrit"), "/v1/chat/completions", chat_body("Hi", 2).dump()).status, 200);
  EXPECT_EQ(get(server.client(), "/health").status, 200);
}

TEST(ServeHttp, ClientThatDisconnectsMidStreamIsCancelledAndMemoryReturnsToIdle) {
  serve::ServeOptions options;
  options.max_batch = 2;
  TestServer server(options);
  serve::HttpClient client = server.client();
  auto abandon_a_stream = [&] {
    RawConnection connection(server.port());
    ASSERT_TRUE(connection.connected());
    connection.send_post("/v1/chat/completions", chat_body("Tell me a long story.", 200, /*stream=*/true).dump());
    ASSERT_TRUE(connection.read_until("\"content\"")) << connection.received();
    // While it runs, a second request shares the batch (so both batch sizes' decode steps exist from here on).
    EXPECT_EQ(post_json(client, "/v1/chat/completions", chat_body("Short", 4).dump()).status, 200);
    connection.close();  // gone mid-stream
  };
  auto cancelled_and_idle = [&](int cancelled) {
    return eventually([&] {
      const std::string text = get(client, "/metrics").body;
      return metric(text, "nvfp4lm_requests_running") == 0 &&
             metric(text, "nvfp4lm_requests_total{endpoint=\"/v1/chat/completions\",status=\"cancelled\"}") ==
                 cancelled;
    });
  };
  abandon_a_stream();
  ASSERT_TRUE(cancelled_and_idle(1)) << get(client, "/metrics").body;
  const double idle = metric(get(client, "/metrics").body, "nvfp4lm_memory_bytes{device=\"cpu\"}");
  ASSERT_GT(idle, 0);

  for (int round = 0; round < 3; ++round) abandon_a_stream();
  EXPECT_TRUE(cancelled_and_idle(4)) << get(client, "/metrics").body;
  const std::string after = get(client, "/metrics").body;
  // Far fewer than the 200 tokens each stream asked for: the sequences stopped when their clients went away.
  EXPECT_LT(metric(after, "nvfp4lm_generation_tokens_total"), 4 * 4 + 4 * 100);
  EXPECT_EQ(metric(after, "nvfp4lm_memory_bytes{device=\"cpu\"}"), idle);
  EXPECT_EQ(post_json(client, "/v1/chat/completions", chat_body("Still there?", 3).dump()).status, 200);
}

TEST(ServeHttp, FullQueueGets429) {
  serve::ServeOptions options;
  options.max_batch = 1;
  options.max_queue = 0;
  options.context = 2048;
  TestServer server(options);
  RawConnection busy(server.port());
  busy.send_post("/v1/chat/completions", chat_body("Keep the only slot busy.", 1500, /*stream=*/true).dump());
  ASSERT_TRUE(busy.read_until("\"content\""));
  // The slot is taken and nothing may wait: the next request is refused at once.
  expect_error(post_json(server.client(), "/v1/chat/completions", chat_body("Hi", 2).dump()), 429, "busy",
               "queue full");
  busy.close();
  EXPECT_TRUE(eventually(
      [&] { return post_json(server.client(), "/v1/chat/completions", chat_body("Hi", 2).dump()).status == 200; }));
}

TEST(ServeHttp, ShutdownCancelsWhatRunsPastTheDeadline) {
  serve::ServeOptions options;
  options.shutdown_timeout_s = 0;
  options.context = 2048;
  TestServer server(options);
  RawConnection stream(server.port());
  stream.send_post("/v1/chat/completions", chat_body("A very long answer, please.", 1500, /*stream=*/true).dump());
  ASSERT_TRUE(stream.read_until("\"content\""));
  std::thread stopper([&] { server.stop(); });
  // The running answer ends with the shutdown error event and [DONE] (no deadline left), then run() returns.
  EXPECT_TRUE(stream.read_until("data: [DONE]")) << stream.received();
  EXPECT_NE(stream.received().find("server_shutting_down"), std::string::npos) << stream.received();
  stopper.join();
}

}  // namespace
}  // namespace nvfp4lm::test::test_serve_http
