// `nvfp4lm serve` as a process, shut down by signals: SIGTERM refuses new requests and finishes the accepted ones,
// running or waiting for a slot, within --shutdown-timeout; at the timeout the waiting ones get a whole 503
// (Retry-After, the error object; a stream that never began gets a 503 too, not a cut-off 200) and a running stream
// an error event; slow or idle clients do not hold up the exit; a second Ctrl-C ends it at once.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "serve_test_util.h"

namespace nvfp4lm::test::test_serve_shutdown {
namespace {

using nlohmann::json;

std::string http_post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

void expect_shutdown_503(const std::optional<RawResponse>& response, const std::string& what) {
  ASSERT_TRUE(response) << what << ": no whole answer";
  EXPECT_EQ(response->status, 503) << what << ": " << response->body;
  EXPECT_TRUE(response->has_header("Content-Length")) << what;
  EXPECT_FALSE(response->header("Retry-After").empty()) << what;
  json body;
  ASSERT_NO_THROW(body = json::parse(response->body)) << what << ": " << response->body;
  EXPECT_EQ(body["error"]["code"], "server_shutting_down") << what;
}

// Sends a running stream (its first token read) and two requests that wait for the one slot behind it.
struct ShutdownScene {
  explicit ShutdownScene(int port, int running_tokens)
      : running(port, 60), waiting_plain(port, 60), waiting_stream(port, 60) {
    EXPECT_TRUE(
        running.send(http_post("/v1/chat/completions", chat_body("A long answer.", running_tokens, true).dump())));
    EXPECT_TRUE(running.read_until("\"content\"")) << running.received();
    EXPECT_TRUE(waiting_plain.send(http_post("/v1/chat/completions", chat_body("Wait for me.", 8).dump())));
    EXPECT_TRUE(waiting_stream.send(http_post("/v1/chat/completions", chat_body("Me too.", 8, true).dump())));
    waited = eventually([&] {
      return metric(serve::HttpClient("127.0.0.1", port).get("/metrics").body, "nvfp4lm_requests_waiting") == 2;
    });
  }
  RawConnection running, waiting_plain, waiting_stream;
  bool waited = false;
};

TEST(ServeShutdown, SigtermFinishesTheAcceptedRequestsRunningOrWaiting) {
  ServeProcess server(
      {"--model", tiny_serve_model_dir().string(), "--max-batch", "1", "--shutdown-timeout", "60", "--context", "512"});
  const int port = server.port();
  ASSERT_GT(port, 0) << server.log();
  ShutdownScene scene(port, 300);
  ASSERT_TRUE(scene.waited) << server.log();

  server.signal(SIGTERM);
  // New requests are refused once the signal is seen (/health says so)...
  EXPECT_TRUE(eventually([&] {
    const serve::HttpClientResponse health = serve::HttpClient("127.0.0.1", port).get("/health");
    return !health.ok() || health.status == 503;
  }));
  const serve::HttpClientResponse late =
      serve::HttpClient("127.0.0.1", port).post("/v1/chat/completions", chat_body("Too late.", 4).dump());
  if (late.ok()) {
    EXPECT_EQ(late.status, 503) << late.body;  // (or the listener is closed already)
  }
  // ...while every accepted one is answered whole: the running stream, then the two that waited for its slot.
  const std::optional<RawResponse> answer = scene.running.read_response();
  ASSERT_TRUE(answer) << scene.running.received();
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(sse_data(answer->body).back(), "[DONE]");
  EXPECT_NE(answer->body.find("\"finish_reason\":\"length\""), std::string::npos) << answer->body;
  EXPECT_EQ(answer->body.find("server_shutting_down"), std::string::npos) << answer->body;
  const std::optional<RawResponse> plain = scene.waiting_plain.read_response();
  ASSERT_TRUE(plain) << scene.waiting_plain.received();
  EXPECT_EQ(plain->status, 200) << plain->body;
  EXPECT_EQ(json::parse(plain->body)["choices"][0]["finish_reason"], "length");
  const std::optional<RawResponse> stream = scene.waiting_stream.read_response();
  ASSERT_TRUE(stream) << scene.waiting_stream.received();
  EXPECT_EQ(stream->status, 200);
  EXPECT_EQ(sse_data(stream->body).back(), "[DONE]");
  EXPECT_EQ(stream->body.find("server_shutting_down"), std::string::npos) << stream->body;
  EXPECT_EQ(server.wait_exit(30), 0) << server.log();
}

TEST(ServeShutdown, AtTheShutdownTimeoutWaitingRequestsGetAWhole503) {
  ServeProcess server({"--model", tiny_serve_model_dir().string(), "--max-batch", "1", "--shutdown-timeout", "0.5",
                       "--context", "4096"});
  const int port = server.port();
  ASSERT_GT(port, 0) << server.log();
  ShutdownScene scene(port, 4000);  // far longer than the half second it is given
  ASSERT_TRUE(scene.waited) << server.log();

  server.signal(SIGTERM);
  // A request that never began gets a whole 503 with Retry-After — a stream too, not a cut-off 200.
  expect_shutdown_503(scene.waiting_plain.read_response(), "a waiting request");
  expect_shutdown_503(scene.waiting_stream.read_response(), "a waiting stream");
  // The running stream ends with an error event and [DONE].
  const std::optional<RawResponse> answer = scene.running.read_response();
  ASSERT_TRUE(answer) << scene.running.received();
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(sse_data(answer->body).back(), "[DONE]");
  EXPECT_NE(answer->body.find("server_shutting_down"), std::string::npos) << answer->body;
  EXPECT_EQ(server.wait_exit(30), 0) << server.log();
}

TEST(ServeShutdown, SlowAndIdleClientsDoNotHoldUpTheExit) {
  ServeProcess server({"--model", tiny_serve_model_dir().string()});
  const int port = server.port();
  ASSERT_GT(port, 0) << server.log();
  RawConnection idle(port);
  RawConnection kept_alive(port);
  ASSERT_TRUE(kept_alive.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  ASSERT_TRUE(kept_alive.read_response());
  RawConnection slow(port);
  const std::string request = http_post("/v1/chat/completions", chat_body("Hi", 2).dump());
  std::atomic<bool> dripping{true};
  std::thread dripper([&] {  // a byte every 200 ms, for longer than the test waits
    for (size_t next = 0; next < request.size() && dripping; ++next) {
      slow.send(request.substr(next, 1));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  server.signal(SIGTERM);
  const int code = server.wait_exit(5);
  dripping = false;
  dripper.join();
  EXPECT_EQ(code, 0) << server.log();
}

// Issue 52: after a sequence of hostile clients — bodies whose parse, schema or template work grew quadratically
// (600,000 keys, a 100,000-entry logit_bias, 20,000 schema properties, 100,000 messages), a 7 MB prompt, a JSON
// bomb, binary garbage, a lying Content-Length, a header that never ends, idle connections — each is answered within
// a few seconds of being sent together, a small completion sent beside them too, and SIGTERM ends the server within
// --shutdown-timeout plus the write grace (it used to take 55-70 s against 30: the preparation threads were still
// parsing).
TEST(ServeShutdown, SigtermExitsInTimeAfterHostileClients) {
  ServeProcess server({"--model", tiny_serve_model_dir().string(), "--shutdown-timeout", "2", "--context", "512"});
  const int port = server.port();
  ASSERT_GT(port, 0) << server.log();
  const double slow = kSanitizerBuild ? 4.0 : 1.0;
  const double bound_s = 3.0 * slow * emulated_time_factor();
  auto object_of = [](size_t keys, const std::string& value) {
    std::string text = "{";
    for (size_t i = 0; i < keys; ++i) text += fmt::format("{}\"k{}\":{}", i ? "," : "", i, value);
    return text + "}";
  };
  auto chat_with = [](const std::string& extra) {
    return R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":2)" + extra + "}";
  };
  std::string messages = "[";
  for (int i = 0; i < 100000; ++i) messages += std::string(i ? "," : "") + R"({"role":"user","content":"x"})";
  messages += "]";
  std::string properties = "{";
  for (int i = 0; i < 4000; ++i) properties += fmt::format(R"({}"p{}":{{"type":"integer"}})", i ? "," : "", i);
  properties += "}";
  const std::vector<std::pair<std::string, std::string>> bodies = {
      {"600,000 keys", object_of(600000, "1")},
      {"a 100,000-entry logit_bias", chat_with(",\"logit_bias\":" + object_of(100000, "1"))},
      {"20,000 schema properties",
       chat_with(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object",)"
                 R"("properties":)" +
                 object_of(20000, R"({"type":"integer"})") + "}}}")},
      {"4,000 optional schema properties",
       chat_with(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object",)"
                 R"("properties":)" +
                 properties + "}}}")},
      {"100,000 messages", R"({"max_tokens":2,"messages":)" + messages + "}"},
      {"a 7 MB prompt",
       R"({"max_tokens":2,"messages":[{"role":"user","content":")" + std::string(7 << 20, 'a') + "\"}]}"},
      {"a JSON bomb", std::string(100000, '[') + std::string(100000, ']')},
      {"binary garbage", std::string("\x00\xff\xfe{\x01", 5) + std::string(4096, '\x9c')},
  };
  // All at once, then a small completion beside them: it is answered within the bound too.
  std::vector<std::unique_ptr<RawConnection>> clients;
  const auto sent = std::chrono::steady_clock::now();
  for (const auto& [what, body] : bodies) {
    clients.push_back(std::make_unique<RawConnection>(port, 600));
    ASSERT_TRUE(clients.back()->send(http_post("/v1/chat/completions", body))) << what;
  }
  const serve::HttpClientResponse beside =
      serve::HttpClient("127.0.0.1", port, 60).post("/v1/chat/completions", chat_body("Hi", 2).dump());
  EXPECT_EQ(beside.status, 200) << beside.body;
  const double beside_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_LT(beside_s, bound_s) << "a small completion beside the hostile requests took " << beside_s << " s";
  RecordProperty("beside_seconds", fmt::format("{:.2f}", beside_s));
  for (size_t i = 0; i < bodies.size(); ++i) {
    const std::string& what = bodies[i].first;
    const std::optional<RawResponse> response = clients[i]->read_response();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    ASSERT_TRUE(response) << what << ": no answer; " << server.log();
    EXPECT_TRUE(response->status == 200 || response->status == 400 || response->status == 413)
        << what << ": " << response->status << " " << response->body.substr(0, 300);
    EXPECT_LT(seconds, bound_s) << what << " answered after " << seconds << " s: " << response->body.substr(0, 300);
  }
  // Left open: a lying Content-Length, a header that never ends, idle connections.
  RawConnection lying(port), endless(port);
  ASSERT_TRUE(lying.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"mess"));
  ASSERT_TRUE(endless.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: aaaa"));
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(std::make_unique<RawConnection>(port));
  // A small completion is still answered at once.
  const auto start = std::chrono::steady_clock::now();
  const serve::HttpClientResponse small =
      serve::HttpClient("127.0.0.1", port, 60).post("/v1/chat/completions", chat_body("Hi", 2).dump());
  EXPECT_EQ(small.status, 200) << small.body;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), bound_s);

  server.signal(SIGTERM);
  const auto signalled = std::chrono::steady_clock::now();
  // --shutdown-timeout 2 plus the write grace; the bound allows for a slow build.
  EXPECT_EQ(server.wait_exit(static_cast<int>(10 * slow * emulated_time_factor())), 0) << server.log();
  const double exit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  RecordProperty("exit_seconds", fmt::format("{:.2f}", exit_s));
}

TEST(ServeShutdown, ASecondCtrlCExitsAtOnce) {
  ServeProcess server({"--model", tiny_serve_model_dir().string(), "--shutdown-timeout", "60", "--context", "2048"});
  const int port = server.port();
  ASSERT_GT(port, 0) << server.log();
  RawConnection stream(port, 30);
  ASSERT_TRUE(stream.send(http_post("/v1/chat/completions", chat_body("A very long answer.", 1500, true).dump())));
  ASSERT_TRUE(stream.read_until("\"content\"")) << stream.received();
  server.signal(SIGINT);
  ASSERT_TRUE(eventually([&] { return server.log().find("SIGINT received") != std::string::npos; })) << server.log();
  server.signal(SIGINT);
  EXPECT_EQ(server.wait_exit(3), 128 + SIGINT) << server.log();
  EXPECT_NE(server.log().find("a second SIGINT"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace nvfp4lm::test::test_serve_shutdown
