// The server's HTTP layer (serve/http_connection.h, http_server.h) under ordinary and hostile traffic, over raw
// sockets with the tiny model: 1,000 idle and 100 slowloris connections delay neither streams nor /health; the
// idle, header, body and write deadlines close connections (counted in /metrics); the connection limit answers
// 503; the body limit holds for chunked bodies (413); invalid UTF-8 is a 400, never a 500; HTTP/1.0 clients get
// answers without chunks; pipelined requests are answered in order; a wrong method is 405 with Allow; --max-queue
// answers 429 (with Retry-After) at its bound however many clients come at once; curl works, 100-continue too.
// Deadlines are short here (a second or a few) so that the suite stays fast.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>

#include "serve_test_util.h"

namespace nvfp4lm::test::test_serve_connections {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Raises the soft open-file limit to `needed` when the hard limit allows; false when it does not.
bool allow_open_files(rlim_t needed) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return true;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) return false;
  limit.rlim_cur = needed;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

std::string metrics_text(int port) { return serve::HttpClient("127.0.0.1", port, 10).get("/metrics").body; }

double closed_count(const std::string& metrics, const std::string& reason) {
  return metric(metrics, "nvfp4lm_http_connections_closed_total{reason=\"" + reason + "\"}");
}

// An OpenAI error object with a one-line message that contains `part`.
void expect_error_object(const RawResponse& response, int status, const std::string& part) {
  EXPECT_EQ(response.status, status) << response.body;
  json body;
  ASSERT_NO_THROW(body = json::parse(response.body)) << response.body;
  ASSERT_TRUE(body.contains("error")) << response.body;
  const std::string message = body["error"].value("message", "");
  EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in " << message;
  EXPECT_TRUE(body["error"].contains("type") && body["error"].contains("code")) << response.body;
}

std::string http_post(const std::string& path, const std::string& body, const std::string& version = "1.1",
                      const std::string& headers = "") {
  return "POST " + path + " HTTP/" + version + "\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(ServeConnections, IdleAndSlowlorisConnectionsDelayNeitherStreamsNorHealth) {
  constexpr int kIdle = 1000, kSlow = 100, kStreams = 16;  // as issue 33's acceptance
  // The sanitizer build and an emulator (qemu-user) run the model ~20x slower: its streams outlast the slow
  // connections' header deadline, and its times say nothing; there the test checks that everything was answered and
  // closed as it should be.
  const bool slow_build = kSanitizerBuild || emulated_time_factor() > 1;
  // Both ends of every connection live in this process.
  if (!allow_open_files(2 * (kIdle + kSlow) + 512)) GTEST_SKIP() << "the open-file hard limit is below 2,700";
  serve::ServeOptions options;
  options.max_batch = kStreams;
  options.http.header_timeout_s = 3;  // the slowloris connections end within the test
  options.http.idle_timeout_s = 600;  // the idle ones do not, however slowly it runs (207 s under qemu-user)
  TestServer server(options);

  // kStreams streams at once: the seconds each took to its [DONE] (1e9 when it failed).
  auto run_streams = [&] {
    std::vector<double> seconds(kStreams, 1e9);
    std::vector<std::thread> clients;
    for (int i = 0; i < kStreams; ++i)
      clients.emplace_back([&, i] {
        const auto start = Clock::now();
        RawConnection connection(server.port(), 20);
        if (!connection.send(http_post("/v1/chat/completions",
                                       chat_body("Story number " + std::to_string(i), 32, /*stream=*/true).dump())))
          return;
        const std::optional<RawResponse> response = connection.read_response();
        if (response && response->status == 200 && response->body.find("data: [DONE]") != std::string::npos)
          seconds[static_cast<size_t>(i)] = seconds_since(start);
      });
    for (std::thread& client : clients) client.join();
    return seconds;
  };
  auto health_seconds = [&] {
    const auto start = Clock::now();
    RawConnection connection(server.port(), 20);
    connection.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    const std::optional<RawResponse> response = connection.read_response();
    return response && response->status == 200 ? seconds_since(start) : 1e9;
  };

  run_streams();  // the first of each batch size builds its decode step
  const std::vector<double> alone = run_streams();
  const double slowest_alone = *std::max_element(alone.begin(), alone.end());
  double health_alone = 0;
  for (int i = 0; i < 5; ++i) health_alone = std::max(health_alone, health_seconds());

  std::vector<std::unique_ptr<RawConnection>> idle, slow;
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(std::make_unique<RawConnection>(server.port(), 1));
    ASSERT_TRUE(idle.back()->connected()) << i;
  }
  const std::string request = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}";
  for (int i = 0; i < kSlow; ++i) {
    slow.push_back(std::make_unique<RawConnection>(server.port(), 1));
    ASSERT_TRUE(slow.back()->connected() && slow.back()->send(request.substr(0, 1))) << i;
  }
  const auto attack_start = Clock::now();
  std::atomic<bool> dripping{true};
  std::thread dripper([&] {  // one more byte every second on each slow connection
    for (size_t next = 1; next < request.size() && dripping; ++next) {
      for (int tick = 0; tick < 20 && dripping; ++tick) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      for (auto& connection : slow) connection->send(request.substr(next, 1));
    }
  });
  std::vector<double> health_attacked;
  std::thread prober([&] {
    for (int i = 0; i < 5; ++i) {
      health_attacked.push_back(health_seconds());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const std::vector<double> attacked = run_streams();
  prober.join();
  const std::string during = metrics_text(server.port());

  for (int i = 0; i < kStreams; ++i)
    EXPECT_LE(attacked[static_cast<size_t>(i)], slow_build ? 1e8 : slowest_alone + 1.0)
        << "stream " << i << " (alone: the slowest took " << slowest_alone << " s)";
  for (const double seconds : health_attacked)
    EXPECT_LE(seconds, slow_build ? 1e8 : health_alone + 1.0) << "alone: " << health_alone;
  if (!slow_build) {
    EXPECT_GE(metric(during, "nvfp4lm_http_connections"), kIdle + kSlow) << during;
  }
  std::cout << "[ info ] streams alone <= " << slowest_alone
            << " s, under attack <= " << *std::max_element(attacked.begin(), attacked.end())
            << " s; /health alone <= " << health_alone
            << " s, under attack <= " << *std::max_element(health_attacked.begin(), health_attacked.end()) << " s\n";

  // The slow connections passed the header deadline: each was closed and counted; the idle ones stay.
  for (auto& connection : slow) {
    connection->set_timeout(5);
    EXPECT_TRUE(connection->closed_by_server());
  }
  EXPECT_LT(seconds_since(attack_start), slow_build ? 1e8 : 3 + 2.5);
  dripping = false;
  dripper.join();
  const std::string after = metrics_text(server.port());
  EXPECT_EQ(closed_count(after, "header_timeout"), kSlow) << after;
  EXPECT_GE(metric(after, "nvfp4lm_http_connections"), kIdle) << after;
}

TEST(ServeConnections, IdleHeaderBodyAndWriteDeadlinesCloseTheConnection) {
  serve::ServeOptions options;
  options.context = 2048;
  options.http.idle_timeout_s = 1;
  options.http.header_timeout_s = 1;
  options.http.body_timeout_s = 1;
  options.http.write_timeout_s = 1;
  options.http.send_buffer_bytes = 4096;  // a client that does not read fills the buffers after a few events
  TestServer server(options);
  RawConnection idle(server.port());
  RawConnection header(server.port());
  ASSERT_TRUE(header.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
  RawConnection body(server.port());
  ASSERT_TRUE(body.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"prompt\":"));
  RawConnection kept(server.port());
  ASSERT_TRUE(kept.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  const std::optional<RawResponse> health = kept.read_response();
  ASSERT_TRUE(health && health->status == 200);
  RawConnection not_reading(server.port(), 5, /*receive_buffer_bytes=*/4096);
  json stream = chat_body("A long answer, please.", 1500, /*stream=*/true);
  stream["logprobs"] = true;
  stream["top_logprobs"] = 20;
  ASSERT_TRUE(not_reading.send(http_post("/v1/chat/completions", stream.dump())));

  const auto start = Clock::now();
  for (RawConnection* connection : {&idle, &header, &body, &kept}) EXPECT_TRUE(connection->closed_by_server());
  EXPECT_LT(seconds_since(start), 3.0 * emulated_time_factor());
  EXPECT_TRUE(eventually([&] {
    const std::string text = metrics_text(server.port());
    return closed_count(text, "write_timeout") == 1 && metric(text, "nvfp4lm_requests_running") == 0;
  })) << metrics_text(server.port());
  const std::string text = metrics_text(server.port());
  EXPECT_EQ(closed_count(text, "idle_timeout"), 2) << text;  // a fresh connection and a kept-alive one
  EXPECT_EQ(closed_count(text, "header_timeout"), 1) << text;
  EXPECT_EQ(closed_count(text, "body_timeout"), 1) << text;
  // The reader that stopped reading was cancelled: its sequence stopped long before 1,500 tokens.
  EXPECT_EQ(metric(text, "nvfp4lm_requests_total{endpoint=\"/v1/chat/completions\",status=\"cancelled\"}"), 1);
  EXPECT_LT(metric(text, "nvfp4lm_generation_tokens_total"), 1000) << text;
}

TEST(ServeConnections, PastTheConnectionLimitA503WithRetryAfter) {
  serve::ServeOptions options;
  options.http.max_connections = 4;
  TestServer server(options);
  std::vector<std::unique_ptr<RawConnection>> open;
  for (int i = 0; i < 4; ++i) {  // each answered once, so the server holds all four
    open.push_back(std::make_unique<RawConnection>(server.port()));
    ASSERT_TRUE(open.back()->send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    ASSERT_TRUE(open.back()->read_response());
  }
  RawConnection extra(server.port());
  const std::optional<RawResponse> refused = extra.read_response();
  ASSERT_TRUE(refused);
  expect_error_object(*refused, 503, "open connections");
  EXPECT_FALSE(refused->header("Retry-After").empty());
  EXPECT_TRUE(extra.closed_by_server());
  open.pop_back();  // room for one again
  serve::HttpClientResponse metrics;
  EXPECT_TRUE(eventually([&] { return (metrics = server.client().get("/metrics")).status == 200; }));
  EXPECT_GE(closed_count(metrics.body, "connection_limit"), 1) << metrics.body;  // and the tries of /metrics
}

TEST(ServeConnections, TheBodyLimitHoldsForChunkedBodies) {
  serve::ServeOptions options;
  options.http.max_body_bytes = 64 << 10;
  TestServer server(options);
  const std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  auto chunk = [](const std::string& data) { return fmt::format("{:x}\r\n{}\r\n", data.size(), data); };
  // A chunked body within the limit is read and answered.
  const std::string small = chat_body("Hi", 2).dump();
  RawConnection within(server.port());
  ASSERT_TRUE(within.send(head + chunk(small.substr(0, 10)) + chunk(small.substr(10)) + "0\r\n\r\n"));
  const std::optional<RawResponse> answered = within.read_response();
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->status, 200) << answered->body;
  // 256 KiB of JSON (whitespace after the object) in 16 KiB chunks: refused past 64 KiB, the connection closed.
  RawConnection over(server.port());
  over.send(head + chunk(small));
  for (int i = 0; i < 16; ++i) over.send(chunk(std::string(16 << 10, ' ')));
  over.send("0\r\n\r\n");
  const std::optional<RawResponse> refused = over.read_response();
  ASSERT_TRUE(refused);
  expect_error_object(*refused, 413, "larger than this server's limit of 65536 bytes");
  EXPECT_TRUE(over.closed_by_server());
}

// Issue 52: an HTTP/1.1 request without Host is a 400 (RFC 9112 §3.2: "A server MUST respond with a 400 (Bad
// Request) status code to any HTTP/1.1 request message that lacks a Host header field"); HTTP/1.0 has no such rule. A
// request without the API key gets its 401 on the header, before a byte of its body is read (a 200 MB body used to be
// read up to the limit, then refused with 413); with the key, a Content-Length past the limit is a 413, also at once.
TEST(ServeConnections, AHostlessRequestIs400AndAWrongKeyIs401BeforeTheBody) {
  serve::ServeOptions options;
  options.http.api_key = "secret";
  TestServer server(options);
  RawConnection hostless(server.port());
  ASSERT_TRUE(hostless.send("GET /health HTTP/1.1\r\n\r\n"));
  const std::optional<RawResponse> no_host = hostless.read_response();
  ASSERT_TRUE(no_host);
  expect_error_object(*no_host, 400, "needs a Host header");
  EXPECT_TRUE(hostless.closed_by_server());

  RawConnection http10(server.port());
  ASSERT_TRUE(http10.send("GET /health HTTP/1.0\r\n\r\n"));
  const std::optional<RawResponse> health = http10.read_response();
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  const std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  for (const std::string& body_header :
       {std::string("Content-Length: 209715200\r\n"), std::string("Transfer-Encoding: chunked\r\n")}) {
    // Only the header is sent: an answer that needed the body would never come (the read times out).
    RawConnection unauthenticated(server.port());
    ASSERT_TRUE(unauthenticated.send(head + body_header + "\r\n"));
    const std::optional<RawResponse> refused = unauthenticated.read_response();
    ASSERT_TRUE(refused) << body_header;
    expect_error_object(*refused, 401, "Incorrect API key");
    EXPECT_TRUE(unauthenticated.closed_by_server()) << body_header;
  }
  RawConnection too_large(server.port());
  ASSERT_TRUE(too_large.send(head + "Authorization: Bearer secret\r\nContent-Length: 209715200\r\n\r\n"));
  const std::optional<RawResponse> limit = too_large.read_response();
  ASSERT_TRUE(limit);
  expect_error_object(*limit, 413, "larger than this server's limit");
  EXPECT_TRUE(too_large.closed_by_server());

  // With the key and a body within the limit: answered.
  RawConnection keyed(server.port());
  ASSERT_TRUE(keyed.send(
      http_post("/v1/chat/completions", chat_body("Hi", 2).dump(), "1.1", "Authorization: Bearer secret\r\n")));
  const std::optional<RawResponse> answered = keyed.read_response();
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->status, 200) << answered->body;
  const std::string text = metrics_text(server.port());
  EXPECT_EQ(metric(text, "nvfp4lm_requests_total{endpoint=\"/v1/chat/completions\",status=\"401\"}"), 2) << text;
}

TEST(ServeConnections, InvalidUtf8AndNonAsciiInRejectedValuesAre400Not500) {
  TestServer server;
  const std::vector<std::string> bodies = {
      "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}], \"max_tokens\": 2}",  // not UTF-8
      "{\"model\": \"\xc3\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}",       // a cut character
      // A role of 39 ASCII letters and two 2-byte characters: the message quotes its first 40 bytes.
      "{\"messages\": [{\"role\": \"" + std::string(39, 'a') + "\xc3\xa9\xc3\xa9\", \"content\": \"x\"}]}"};
  for (const std::string& body : bodies) {
    RawConnection connection(server.port());
    ASSERT_TRUE(connection.send(http_post("/v1/chat/completions", body)));
    const std::optional<RawResponse> response = connection.read_response();
    ASSERT_TRUE(response) << body;
    expect_error_object(*response, 400, "");
  }
  const std::string text = metrics_text(server.port());
  EXPECT_EQ(metric(text, "nvfp4lm_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"}"), 3) << text;
  EXPECT_EQ(text.find("status=\"500\""), std::string::npos) << text;
}

TEST(ServeConnections, Http10ClientsGetAnswersWithoutChunks) {
  TestServer server;
  RawConnection plain(server.port());
  ASSERT_TRUE(plain.send(http_post("/v1/chat/completions", chat_body("Hi", 4).dump(), "1.0")));
  const std::optional<RawResponse> answer = plain.read_response();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200) << answer->body;
  EXPECT_FALSE(answer->chunked);
  EXPECT_TRUE(answer->has_header("Content-Length"));
  EXPECT_EQ(json::parse(answer->body)["object"], "chat.completion");
  EXPECT_TRUE(plain.closed_by_server());  // HTTP/1.0 without keep-alive: one request a connection

  // A stream has no length: it ends with the connection.
  RawConnection streamed(server.port());
  ASSERT_TRUE(streamed.send(http_post("/v1/chat/completions", chat_body("Hi", 4, /*stream=*/true).dump(), "1.0")));
  const std::optional<RawResponse> events = streamed.read_response();
  ASSERT_TRUE(events);
  EXPECT_EQ(events->status, 200);
  EXPECT_FALSE(events->chunked);
  EXPECT_TRUE(events->close_delimited);
  EXPECT_EQ(sse_data(events->body).back(), "[DONE]") << events->body;

  // HTTP/1.0 keep-alive, when asked for.
  RawConnection kept(server.port());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(kept.send("GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    const std::optional<RawResponse> health = kept.read_response();
    ASSERT_TRUE(health) << i;
    EXPECT_EQ(health->status, 200);
    EXPECT_EQ(health->header("Connection"), "keep-alive");
  }
}

TEST(ServeConnections, PipelinedRequestsAreAnsweredInOrder) {
  TestServer server;
  RawConnection connection(server.port(), 20);
  const json completion = {{"prompt", "Once"}, {"max_tokens", 3}, {"temperature", 0}, {"stream", true}};
  ASSERT_TRUE(connection.send(
      "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + http_post("/v1/chat/completions", chat_body("Hi", 3).dump()) +
      "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + http_post("/v1/completions", completion.dump()) +
      "GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  std::vector<RawResponse> answers;
  for (int i = 0; i < 5; ++i) {
    std::optional<RawResponse> answer = connection.read_response();
    ASSERT_TRUE(answer) << "answer " << i << " of 5 missing; received:\n" << connection.received();
    answers.push_back(*answer);
  }
  EXPECT_EQ(json::parse(answers[0].body)["status"], "ok");
  EXPECT_EQ(json::parse(answers[1].body)["object"], "chat.completion");
  EXPECT_EQ(json::parse(answers[2].body)["object"], "list");
  EXPECT_TRUE(answers[3].chunked);
  EXPECT_EQ(sse_data(answers[3].body).back(), "[DONE]");
  EXPECT_EQ(answers[4].status, 404);
}

TEST(ServeConnections, AWrongMethodIs405WithAllow) {
  TestServer server;
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {{"GET", "/v1/chat/completions", "POST"},
                                                                                {"PUT", "/v1/completions", "POST"},
                                                                                {"POST", "/health", "GET, HEAD"},
                                                                                {"DELETE", "/v1/models", "GET, HEAD"},
                                                                                {"POST", "/metrics", "GET, HEAD"}};
  RawConnection connection(server.port());
  for (const auto& [method, path, allow] : cases) {
    ASSERT_TRUE(connection.send(method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"));
    const std::optional<RawResponse> response = connection.read_response();
    ASSERT_TRUE(response) << method << " " << path;
    expect_error_object(*response, 405, path + " takes " + allow);
    EXPECT_EQ(response->header("Allow"), allow + ", OPTIONS") << method << " " << path;
  }
  // HEAD: the head of the GET answer, no body.
  ASSERT_TRUE(connection.send(
      "HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  const std::optional<RawResponse> head = connection.read_response(/*head_only=*/true);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->header("Content-Length"), "15");
  const std::optional<RawResponse> get = connection.read_response();  // right after the head: no body between
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->body, "{\"status\":\"ok\"}");
}

TEST(ServeConnections, MaxQueueAnswers429WithRetryAfterAtItsBound) {
  constexpr int kClients = 60, kQueue = 40;  // more clients than the old server's 32 threads
  serve::ServeOptions options;
  options.max_batch = 1;
  options.max_queue = kQueue;
  options.context = 2048;
  TestServer server(options);
  std::vector<std::unique_ptr<RawConnection>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RawConnection>(server.port()));
    ASSERT_TRUE(clients.back()->send(http_post("/v1/chat/completions", chat_body("Keep busy", 1500).dump())));
  }
  // One runs, kQueue wait; the rest are refused at once.
  const int refused_expected = kClients - 1 - kQueue;
  const std::string key = "nvfp4lm_requests_total{endpoint=\"/v1/chat/completions\",status=\"429\"}";
  EXPECT_TRUE(eventually([&] { return metric(metrics_text(server.port()), key) == refused_expected; }, 10))
      << metrics_text(server.port());
  EXPECT_EQ(metric(metrics_text(server.port()), "nvfp4lm_requests_waiting"), kQueue);
  int refused = 0;
  for (auto& client : clients) {
    client->set_timeout(0.05);
    const std::optional<RawResponse> response = client->read_response();
    if (!response) continue;  // waiting or running
    ++refused;
    expect_error_object(*response, 429, "busy");
    EXPECT_EQ(response->header("Retry-After"), "1");
  }
  EXPECT_EQ(refused, refused_expected);
  clients.clear();  // every waiting client goes away: the queue empties and the server answers again
  EXPECT_TRUE(eventually(
      [&] { return post_json(server.client(), "/v1/chat/completions", chat_body("Hi", 2).dump()).status == 200; }));
}

TEST(ServeConnections, CurlStreamsOverHttp10AndSendsALargeBodyAfter100Continue) {
  if (std::system("command -v curl >/dev/null 2>&1") != 0) GTEST_SKIP() << "curl not found";
  TestServer server;
  TempDir dir;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/v1/chat/completions";
  write_file(dir / "stream.json", chat_body("Hi", 4, /*stream=*/true).dump());
  std::string large = chat_body("Hi", 2).dump();
  large.append(size_t{2} << 20, ' ');  // curl asks "Expect: 100-continue" before a body this large
  write_file(dir / "large.json", large);
  const auto run = [&](const std::string& args, const fs::path& out) {
    return std::system(("curl -sS --max-time 20 " + args + " -H 'Content-Type: application/json' " + url + " >" +
                        quoted(out) + " 2>&1")
                           .c_str());
  };
  EXPECT_EQ(run("--http1.0 -N --data-binary @" + quoted(dir / "stream.json"), dir / "stream.out"), 0)
      << read_file(dir / "stream.out");
  EXPECT_EQ(sse_data(read_file(dir / "stream.out")).back(), "[DONE]") << read_file(dir / "stream.out");
  // Without the server's "100 Continue" curl would wait the whole --expect100-timeout before sending the body.
  const auto start = Clock::now();
  EXPECT_EQ(run("--expect100-timeout 30 -w '\\n%{http_code}' --data-binary @" + quoted(dir / "large.json"),
                dir / "large.out"),
            0);
  EXPECT_LT(seconds_since(start), 15.0);
  const std::string out = read_file(dir / "large.out");
  EXPECT_EQ(out.substr(out.size() - 3), "200") << out;
}

}  // namespace
}  // namespace nvfp4lm::test::test_serve_connections
