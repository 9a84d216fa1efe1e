// `nvfp4lm serve` as a process, shut down by signals: SIGTERM refuses new requests and finishes the accepted ones,
// running or waiting for a slot, within --shutdown-timeout; at the timeout the waiting ones get a whole 503
// (Retry-After, the error object; a stream that never began gets a 503 too, not a cut-off 200) and a running stream
// an error event; slow or idle clients do not hold up the exit; a second Ctrl-C ends it at once.
#include <gtest/gtest.h>

#include <atomic>

#include "serve_test_util.h"

namespace nvfp4lm::test {
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
}  // namespace nvfp4lm::test
