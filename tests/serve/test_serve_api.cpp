// The server's API beyond one completion (issue 33's expected features), over loopback HTTP with the tiny model:
// n > 1 choices (each sampled with seed + i, so choice 0 is the n = 1 answer; streamed with their indexes);
// /tokenize and /detokenize in vLLM's and llama-server's shapes, llama-server's /apply-template; CORS answers and
// preflights; an access-log line per request; completions' text_offset counted in characters, not bytes; logit_bias and
// the penalties over HTTP; a prefix-cache hit's time to first token; and running streams' gaps while a long prompt is
// prefilled in chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "serve/openai_response.h"
#include "serve_test_util.h"
#include "tokenizer/chat.h"

namespace nvfp4lm::test::test_serve_api {
namespace {

using nlohmann::json;

json sampled_chat(const std::string& question, int max_tokens, int n, uint64_t seed) {
  json body = chat_body(question, max_tokens);
  body["temperature"] = 1.0;
  body["top_k"] = 0;
  body["top_p"] = 1.0;
  body["seed"] = seed;
  body["n"] = n;
  return body;
}

TEST(ServeApi, NChoicesAreSequencesSeededFromTheRequestsSeed) {
  TestServer server;
  serve::HttpClient client = server.client();
  const HttpResult three = post_json(client, "/v1/chat/completions", sampled_chat("Tell a story.", 12, 3, 41).dump());
  ASSERT_EQ(three.status, 200) << three.body;
  const json answer = three.json();
  ASSERT_EQ(answer["choices"].size(), 3u) << three.body;
  int64_t completion_tokens = 0;
  std::vector<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    const json& choice = answer["choices"][static_cast<size_t>(i)];
    EXPECT_EQ(choice["index"], i);
    texts.push_back(choice["message"]["content"]);
    // Choice i is the answer a request with n = 1 and seed 41 + i gets.
    const HttpResult alone = post_json(client, "/v1/chat/completions",
                                       sampled_chat("Tell a story.", 12, 1, 41 + static_cast<uint64_t>(i)).dump());
    ASSERT_EQ(alone.status, 200) << alone.body;
    EXPECT_EQ(alone.json()["choices"][0]["message"]["content"], texts.back()) << "choice " << i;
    completion_tokens += alone.json()["usage"]["completion_tokens"].get<int64_t>();
  }
  EXPECT_TRUE(texts[0] != texts[1] || texts[1] != texts[2]) << "three seeds, three identical samples";
  EXPECT_EQ(answer["usage"]["completion_tokens"], completion_tokens);
  EXPECT_EQ(answer["usage"]["total_tokens"],
            answer["usage"]["prompt_tokens"].get<int64_t>() + completion_tokens);  // the prompt counted once

  // Streamed: every chunk names its choice; each choice gets its role chunk and its finish_reason; the texts are the
  // same as unstreamed.
  json body = sampled_chat("Tell a story.", 12, 3, 41);
  body["stream"] = true;
  const HttpResult streamed = post_json(client, "/v1/chat/completions", body.dump());
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const std::vector<std::string> events = sse_data(streamed.body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  std::map<int, std::string> text;
  std::map<int, int> roles, finishes;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    ASSERT_EQ(chunk["choices"].size(), 1u) << events[i];
    const json& choice = chunk["choices"][0];
    const int index = choice["index"];
    if (choice["delta"].contains("role")) ++roles[index];
    if (choice["delta"].contains("content")) text[index] += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) ++finishes[index];
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(text[i], texts[static_cast<size_t>(i)]) << "choice " << i;
    EXPECT_EQ(roles[i], 1) << "choice " << i;
    EXPECT_EQ(finishes[i], 1) << "choice " << i;
  }

  // Greedy choices are all the same answer, as OpenAI's are.
  json greedy = chat_body("Hi", 6);
  greedy["n"] = 2;
  const HttpResult two = post_json(client, "/v1/chat/completions", greedy.dump());
  ASSERT_EQ(two.status, 200) << two.body;
  EXPECT_EQ(two.json()["choices"][0]["message"], two.json()["choices"][1]["message"]);
}

TEST(ServeApi, MoreChoicesThanTheQueueHoldsIsA429AndWithdrawsTheRest) {
  serve::ServeOptions options;
  options.max_batch = 1;
  options.max_queue = 1;
  TestServer server(options);
  serve::HttpClient client = server.client();
  json body = chat_body("Hi", 4);
  body["n"] = 4;  // 1 slot + 1 queue place: the third choice does not fit
  const HttpResult refused = post_json(client, "/v1/chat/completions", body.dump());
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_FALSE(refused.header("Retry-After").empty());
  // Nothing of it stays queued: the server answers the next request at once, and n = 2 fits.
  body["n"] = 2;
  const HttpResult fits = post_json(client, "/v1/chat/completions", body.dump());
  ASSERT_EQ(fits.status, 200) << fits.body;
  EXPECT_EQ(fits.json()["choices"].size(), 2u);
}

TEST(ServeApi, TokenizeAndDetokenizeInBothServersShapes) {
  serve::ServeOptions options;
  options.http.api_key = "k";
  TestServer server(options);
  serve::HttpClient client = server.client("k");
  const Tokenizer& tokenizer = tiny_serve_tokenizer();
  const std::string text = "Hello world, ünïcode!";
  const std::vector<int32_t> ids = tokenizer.encode(text);

  for (const char* key : {"prompt", "content"}) {
    const HttpResult result = post_json(client, "/tokenize", json{{key, text}}.dump());
    ASSERT_EQ(result.status, 200) << key << ": " << result.body;
    EXPECT_EQ(result.json()["tokens"].get<std::vector<int32_t>>(), ids) << key;
    EXPECT_EQ(result.json()["count"], ids.size()) << key;
    EXPECT_EQ(result.json()["max_model_len"], 256) << key;
  }
  // Chat messages: the prompt /v1/chat/completions runs (template + generation prompt).
  const json messages = json::array({{{"role", "user"}, {"content", "Name three colours."}}});
  const HttpResult chat = post_json(client, "/tokenize", json{{"messages", messages}}.dump());
  ASSERT_EQ(chat.status, 200) << chat.body;
  const HttpResult completion = post_json(client, "/v1/chat/completions", chat_body("Name three colours.", 1).dump());
  ASSERT_EQ(completion.status, 200) << completion.body;
  EXPECT_EQ(chat.json()["count"], completion.json()["usage"]["prompt_tokens"]);
  // llama-server's /apply-template: the text of that prompt (apply_chat_template(tokenize=False)).
  const HttpResult applied = post_json(client, "/apply-template", json{{"messages", messages}}.dump());
  ASSERT_EQ(applied.status, 200) << applied.body;
  EXPECT_EQ(tokenizer.encode(applied.json()["prompt"].get<std::string>()),
            chat.json()["tokens"].get<std::vector<int32_t>>());
  EXPECT_NE(applied.json()["prompt"].get<std::string>().find("Name three colours."), std::string::npos);
  EXPECT_EQ(post_json(client, "/apply-template", json{{"prompt", "x"}}.dump()).status, 400);
  EXPECT_EQ(post_json(server.client(), "/apply-template", json{{"messages", messages}}.dump()).status, 401);

  const HttpResult back = post_json(client, "/detokenize", json{{"tokens", ids}}.dump());
  ASSERT_EQ(back.status, 200) << back.body;
  EXPECT_EQ(back.json()["prompt"], text);
  EXPECT_EQ(back.json()["content"], text);

  EXPECT_EQ(post_json(client, "/tokenize", json{{"prompt", 5}}.dump()).status, 400);
  EXPECT_EQ(post_json(client, "/tokenize", json{{"other", "x"}}.dump()).status, 400);
  EXPECT_EQ(post_json(client, "/tokenize", "{not json").status, 400);
  const HttpResult bad_id = post_json(client, "/detokenize", json{{"tokens", {1, 999999999}}}.dump());
  EXPECT_EQ(bad_id.status, 400) << bad_id.body;
  EXPECT_NE(bad_id.body.find("'tokens'[1]"), std::string::npos) << bad_id.body;
  // They read the model's tokenizer: the API key guards them as it guards /v1/*.
  EXPECT_EQ(post_json(server.client(), "/tokenize", json{{"prompt", "x"}}.dump()).status, 401);
  const HttpResult get_tokenize = get(client, "/tokenize");
  EXPECT_EQ(get_tokenize.status, 405);
  EXPECT_EQ(get_tokenize.header("Allow"), "POST, OPTIONS");
}

TEST(ServeApi, CorsHeadersForAllowedOriginsAndPreflightsWithoutTheKey) {
  serve::ServeOptions options;
  options.http.api_key = "k";
  options.http.cors_origins = {"http://app.example"};
  TestServer server(options);
  serve::HttpClient client = server.client("k");

  const auto health_from = [&](const std::string& origin) {
    return to_result(client.request("GET", "/health", {}, {{"Origin", origin}}));
  };
  const HttpResult allowed = health_from("http://app.example");
  ASSERT_EQ(allowed.status, 200);
  EXPECT_EQ(allowed.header("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_EQ(allowed.header("Vary"), "Origin");
  EXPECT_EQ(health_from("http://evil.example").header("Access-Control-Allow-Origin"), "");

  // A streamed completion carries it too (the header goes out with the stream's head).
  const HttpResult streamed = to_result(client.request("POST", "/v1/chat/completions", chat_body("Hi", 3, true).dump(),
                                                       {{"Origin", "http://app.example"}}));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_EQ(streamed.header("Access-Control-Allow-Origin"), "http://app.example");

  // The preflight: no Authorization (browsers send none), 204 with what the route takes.
  const HttpResult preflight =
      to_result(server.client().request("OPTIONS", "/v1/chat/completions", {},
                                        {{"Origin", "http://app.example"},
                                         {"Access-Control-Request-Method", "POST"},
                                         {"Access-Control-Request-Headers", "authorization, content-type"}}));
  EXPECT_EQ(preflight.status, 204) << preflight.body;
  EXPECT_EQ(preflight.header("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_EQ(preflight.header("Access-Control-Allow-Methods"), "POST, OPTIONS");
  EXPECT_EQ(preflight.header("Access-Control-Allow-Headers"), "authorization, content-type");

  // Without --cors-origin there are no CORS headers at all.
  TestServer plain;
  const HttpResult none = to_result(plain.client().request("GET", "/health", {}, {{"Origin", "http://app.example"}}));
  EXPECT_EQ(none.header("Access-Control-Allow-Origin"), "");
  const HttpResult options_plain =
      to_result(plain.client().request("OPTIONS", "/v1/models", {}, {{"Origin", "http://app.example"}}));
  EXPECT_EQ(options_plain.status, 204);
  EXPECT_EQ(options_plain.header("Allow"), "GET, HEAD, OPTIONS");
  EXPECT_EQ(options_plain.header("Access-Control-Allow-Origin"), "");
}

TEST(ServeApi, AnAccessLogLinePerRequest) {
  TestServer server;
  serve::HttpClient client = server.client();
  testing::internal::CaptureStderr();
  ASSERT_EQ(get(client, "/health").status, 200);
  ASSERT_EQ(post_json(client, "/v1/completions", json{{"prompt", "x"}, {"max_tokens", 2}}.dump()).status, 200);
  ASSERT_EQ(get(client, "/nope").status, 404);
  // A line is written once its answer is out, before the connection reads the next request: one more request makes
  // sure the last line above was written.
  ASSERT_EQ(get(client, "/health").status, 200);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("\"GET /health HTTP/1.1\" 200"), std::string::npos) << log;
  EXPECT_NE(log.find("\"POST /v1/completions HTTP/1.1\" 200"), std::string::npos) << log;
  EXPECT_NE(log.find("\"GET /nope HTTP/1.1\" 404"), std::string::npos) << log;
}

TEST(ServeApi, CompletionTextOffsetsCountCharacters) {
  const Tokenizer& tokenizer = tiny_serve_tokenizer();
  serve::CompletionRequest request;
  request.endpoint = serve::Endpoint::Completions;
  request.top_logprobs = 0;
  for (const bool stream : {false, true}) {
    request.stream = stream;
    serve::CompletionResponse response(request, tokenizer, "cmpl-1", 0, "m");
    // Three tokens whose final texts are "é" (two bytes, one character), "ab" and "c".
    std::string sse;
    int64_t generated = 0;
    for (const std::string piece : {"é", "ab", "c"}) {
      SequenceEvent event;
      event.token = tokenizer.encode(piece).front();
      event.text = piece;
      event.logprobs = NextTokenLogprobs{{event.token, -0.5}, {}};
      event.prompt_tokens = 1;
      event.generated_tokens = ++generated;
      event.finished = generated == 3;
      sse += response.add(event);
    }
    std::vector<int64_t> offsets;
    if (!stream) {
      offsets = response.body()["choices"][0]["logprobs"]["text_offset"].get<std::vector<int64_t>>();
    } else {
      for (const std::string& data : sse_data(sse)) {
        const json chunk = json::parse(data);
        const json& logprobs = chunk["choices"][0]["logprobs"];
        if (!logprobs.is_null()) offsets.push_back(logprobs["text_offset"][0]);
      }
    }
    EXPECT_EQ(offsets, (std::vector<int64_t>{0, 1, 3})) << (stream ? "streamed" : "whole");
  }
}

TEST(ServeApi, LogitBiasAndPenaltiesOverHttp) {
  TestServer server;
  serve::HttpClient client = server.client();
  const Tokenizer& tokenizer = tiny_serve_tokenizer();
  const int32_t sky = tokenizer.encode(" sky").front();
  json body = {{"prompt", "Once"}, {"max_tokens", 3}, {"temperature", 0}};
  body["logit_bias"] = {{std::to_string(sky), 100}};
  const HttpResult forced = post_json(client, "/v1/completions", body.dump());
  ASSERT_EQ(forced.status, 200) << forced.body;
  EXPECT_EQ(forced.json()["choices"][0]["text"], tokenizer.decode(std::vector<int32_t>{sky, sky, sky}));
  // A frequency penalty of 2 against a bias of 3: the second token is another one.
  body["logit_bias"] = {{std::to_string(sky), 3}};
  body["frequency_penalty"] = 2.0;
  body["max_tokens"] = 8;
  body["logprobs"] = 0;
  const HttpResult penalized = post_json(client, "/v1/completions", body.dump());
  ASSERT_EQ(penalized.status, 200) << penalized.body;
  const json tokens = penalized.json()["choices"][0]["logprobs"]["tokens"];
  EXPECT_LT(std::count(tokens.begin(), tokens.end(), json(" sky")), 8) << penalized.body;
  const HttpResult out_of_range =
      post_json(client, "/v1/completions", json{{"prompt", "x"}, {"logit_bias", {{"99999999", 1}}}}.dump());
  EXPECT_EQ(out_of_range.status, 400) << out_of_range.body;
}

// Seconds from sending `body` (a stream) to its first content event.
double time_to_first_token(int port, const json& body) {
  RawConnection connection(port, 60);
  const std::string text = body.dump();
  const auto start = std::chrono::steady_clock::now();
  connection.send_post("/v1/completions", text);
  EXPECT_TRUE(connection.read_until("\"text\"")) << connection.received();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  connection.read_until("[DONE]");
  return seconds;
}

TEST(ServeApi, APrefixCacheHitCutsTheTimeToFirstToken) {
  serve::ServeOptions options;
  options.context = 4096;
  options.max_batch = 2;
  TestServer server(options);
  // 1,895 prompt tokens, as the repeated prompt; token ids, so no tokenizing time is measured.
  std::vector<int32_t> prompt(1895);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(100 + (i * 7919) % 50000);
  const json body = {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}, {"stream", true}};
  const double first = time_to_first_token(server.port(), body);
  double hit = 1e9;
  for (int i = 0; i < 3; ++i) hit = std::min(hit, time_to_first_token(server.port(), body));
  const std::string metrics = get(server.client(), "/metrics").body;
  EXPECT_GE(metric(metrics, "nvfp4lm_prefix_cache_hits_total"), 3) << metrics;
  EXPECT_GE(metric(metrics, "nvfp4lm_prefix_cache_reused_tokens_total"), 3 * 1894) << metrics;
  std::cout << "time to first token: " << first << " s, with the cached prefix " << hit << " s\n";
  if (!kSanitizerBuild) {
    EXPECT_LT(hit, 0.1 * first) << "first " << first << " s, with the cached prefix " << hit << " s";
  }
}

TEST(ServeApi, RunningStreamsKeepTheirPaceWhileALongPromptIsPrefilled) {
  if (kSanitizerBuild) GTEST_SKIP() << "a timing judgement: the sanitizer build runs the model 20x slower";
  if (emulated_time_factor() > 1)  // its 3,000-token prefill took 892 s under qemu-user, past the client's limits
    GTEST_SKIP() << "a timing judgement: under an emulator the model runs ~20x slower";
  serve::ServeOptions options;
  options.context = 4096;
  options.max_batch = 2;
  TestServer server(options);
  RawConnection running(server.port(), 60);
  running.send_post("/v1/completions",
                    json{{"prompt", "Once"}, {"max_tokens", 600}, {"temperature", 0}, {"stream", true}}.dump());
  ASSERT_TRUE(running.read_until("\"text\"")) << running.received();
  // Timestamps of the stream's events, read on a thread while a 3,000-token prompt joins.
  std::vector<double> arrivals;
  std::thread reader([&] {
    size_t seen = 0;
    const auto start = std::chrono::steady_clock::now();
    while (true) {
      size_t count = 0;
      for (size_t at = running.received().find("data: "); at != std::string::npos;
           at = running.received().find("data: ", at + 1))
        ++count;
      for (; seen < count; ++seen)
        arrivals.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (running.received().find("[DONE]") != std::string::npos) break;
      if (!running.read_more()) break;
    }
  });
  std::vector<int32_t> prompt(3000);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(100 + (i * 104729) % 50000);
  const HttpResult long_prompt = post_json(server.client(), "/v1/completions",
                                           json{{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}}.dump());
  reader.join();
  ASSERT_EQ(long_prompt.status, 200) << long_prompt.body;
  ASSERT_GT(arrivals.size(), 10u);
  double longest = 0;
  for (size_t i = 1; i < arrivals.size(); ++i) longest = std::max(longest, arrivals[i] - arrivals[i - 1]);
  std::cout << "longest gap between the running stream's events: " << longest << " s (" << arrivals.size()
            << " events)\n";
  EXPECT_LT(longest, 0.5) << "the running stream waited " << longest << " s for a token";
}

}  // namespace
}  // namespace nvfp4lm::test::test_serve_api
