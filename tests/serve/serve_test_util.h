// Helpers for the serve tests: a tiny synthesized model (bundled tokenizer) shared by a test executable, an
// in-process server on a free loopback port, HTTP calls through the library's client (serve/http_client.h), a raw
// socket for what a client library would not send (a stream abandoned half way, pipelined or slow requests,
// HTTP/1.0) with a reader of raw answers, and `nvfp4lm serve` as a child process.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "common/test_util.h"
#include "model/qwen3_model.h"
#include "serve/http_client.h"
#include "serve/server.h"
#include "tokenizer/tokenizer.h"

extern char** environ;

namespace nvfp4lm::test {

// `synth --preset tiny --seed 3`; its directory name "tiny-3" is the served model's name.
inline const fs::path& tiny_serve_model_dir() { return synth_tiny_model(3); }
inline const char* const kServedName = "tiny-3";

inline const Qwen3Model& tiny_serve_model() {
  static const Qwen3Model model = Qwen3Model::load(tiny_serve_model_dir());
  return model;
}

inline const Tokenizer& tiny_serve_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::load(tiny_serve_model_dir());
  return tokenizer;
}

// A greedy chat request to the served model.
inline nlohmann::json chat_body(const std::string& question, int max_tokens, bool stream = false) {
  return {{"model", kServedName},
          {"messages", {{{"role", "user"}, {"content", question}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"stream", stream}};
}

// A Server on 127.0.0.1:<free port>, running in a thread until the object dies.
class TestServer {
 public:
  explicit TestServer(serve::ServeOptions options = {}) {
    options.http.port = 0;
    if (options.context == 0) options.context = 256;
    server_ = std::make_unique<serve::Server>(tiny_serve_model(), tiny_serve_tokenizer(), options);
    thread_ = std::thread([this] { server_->run(); });
  }
  ~TestServer() { stop(); }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  // shutdown() and wait for run() to return.
  void stop() {
    if (!thread_.joinable()) return;
    server_->shutdown();
    thread_.join();
  }
  int port() const { return server_->port(); }
  serve::Server& server() { return *server_; }
  serve::HttpClient client(const std::string& api_key = "") const {
    serve::HttpClient client("127.0.0.1", port(), /*timeout_s=*/60.0 * emulated_time_factor());
    if (!api_key.empty()) client.set_bearer_token(api_key);
    return client;
  }

 private:
  std::unique_ptr<serve::Server> server_;
  std::thread thread_;
};

struct HttpResult {
  int status = 0;  // -1: no answer (body says why)
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  nlohmann::json json() const { return nlohmann::json::parse(body); }
  std::string header(const std::string& name) const {
    for (const auto& [key, value] : headers)
      if (strcasecmp(key.c_str(), name.c_str()) == 0) return value;
    return {};
  }
};

inline HttpResult to_result(serve::HttpClientResponse response) {
  if (!response.ok()) return {-1, response.error, {}};
  return {response.status, std::move(response.body), std::move(response.headers)};
}

inline HttpResult post_json(serve::HttpClient& client, const std::string& path, const std::string& body) {
  return to_result(client.post(path, body));
}
inline HttpResult post_json(serve::HttpClient&& client, const std::string& path, const std::string& body) {
  return post_json(client, path, body);
}
inline HttpResult get(serve::HttpClient& client, const std::string& path) { return to_result(client.get(path)); }
inline HttpResult get(serve::HttpClient&& client, const std::string& path) { return get(client, path); }

// The "data: ..." payloads of a server-sent event stream, in order.
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> data;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    data.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return data;
}

// The value of a Prometheus sample line `name` (labels included, exactly as printed), or -1.
inline double metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

// One HTTP answer as it came over a raw connection.
struct RawResponse {
  int status = 0;
  std::string status_line;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // chunks joined
  bool chunked = false;
  bool close_delimited = false;  // neither Content-Length nor chunks: the body ended with the connection
  std::string header(const std::string& name) const {
    for (const auto& [key, value] : headers)
      if (strcasecmp(key.c_str(), name.c_str()) == 0) return value;
    return {};
  }
  bool has_header(const std::string& name) const {
    for (const auto& [key, value] : headers)
      if (strcasecmp(key.c_str(), name.c_str()) == 0) return true;
    return false;
  }
};

// A plain TCP connection to the server: the test writes raw HTTP and reads what comes back.
class RawConnection {
 public:
  // receive_buffer_bytes > 0: SO_RCVBUF before connecting (a client that reads slowly shows it to the server early).
  explicit RawConnection(int port, double timeout_s = 5, int receive_buffer_bytes = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (receive_buffer_bytes > 0)
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof(receive_buffer_bytes));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    set_timeout(timeout_s);
  }
  ~RawConnection() { close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  void set_timeout(double seconds) {
    timeval timeout{static_cast<time_t>(seconds), static_cast<suseconds_t>((seconds - std::floor(seconds)) * 1e6)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  // Sends all of `bytes`; false when the connection is gone.
  bool send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  void send_post(const std::string& path, const std::string& body) {
    const std::string request = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_TRUE(send(request));
  }
  // Reads until `text` has arrived (true) or the peer closes / the timeout passes (false).
  bool read_until(const std::string& text) {
    size_t at = 0;
    return find_from(text, 0, at);
  }
  // Reads until the peer closes the connection (true) or the timeout passes / a reset (false).
  bool read_to_end() {
    char buffer[16384];
    while (true) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
      received_.append(buffer, static_cast<size_t>(n));
    }
  }
  // The next whole answer after those read before, or nullopt (the connection ended or the timeout passed first).
  // `head_only`: the answer to a HEAD request (a Content-Length but no body).
  std::optional<RawResponse> read_response(bool head_only = false) {
    size_t head_end = 0;
    if (!find_from("\r\n\r\n", consumed_, head_end)) return std::nullopt;
    RawResponse response;
    std::istringstream head(received_.substr(consumed_, head_end - consumed_));
    consumed_ = head_end + 4;
    std::getline(head, response.status_line);
    if (!response.status_line.empty() && response.status_line.back() == '\r') response.status_line.pop_back();
    if (response.status_line.size() >= 12) response.status = std::atoi(response.status_line.c_str() + 9);
    for (std::string line; std::getline(head, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const size_t value = line.find_first_not_of(' ', colon + 1);
      response.headers.emplace_back(line.substr(0, colon), value == std::string::npos ? "" : line.substr(value));
    }
    response.chunked = strcasecmp(response.header("Transfer-Encoding").c_str(), "chunked") == 0;
    if (response.status == 100 || head_only) return response;  // "100 Continue": the answer itself follows
    if (response.has_header("Content-Length")) {
      const size_t length = std::stoul(response.header("Content-Length"));
      if (!fill(consumed_ + length)) return std::nullopt;
      response.body = received_.substr(consumed_, length);
      consumed_ += length;
    } else if (response.chunked) {
      while (true) {
        size_t line_end = 0;
        if (!find_from("\r\n", consumed_, line_end)) return std::nullopt;
        const size_t size = std::stoul(received_.substr(consumed_, line_end - consumed_), nullptr, 16);
        consumed_ = line_end + 2;
        if (!fill(consumed_ + size + 2)) return std::nullopt;
        response.body += received_.substr(consumed_, size);
        consumed_ += size + 2;
        if (size == 0) break;
      }
    } else {
      response.close_delimited = true;
      if (!read_to_end()) return std::nullopt;
      response.body = received_.substr(consumed_);
      consumed_ = received_.size();
    }
    return response;
  }
  // One read of what has arrived (waiting up to the timeout); false when the peer closed or nothing came.
  bool read_more() {
    char buffer[16384];
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) return false;
    received_.append(buffer, static_cast<size_t>(n));
    return true;
  }
  // True when the server closed the connection within the timeout (bytes that arrive first are kept).
  bool closed_by_server() { return read_to_end(); }
  const std::string& received() const { return received_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  // Reads until received_ holds at least `size` bytes.
  bool fill(size_t size) {
    char buffer[16384];
    while (received_.size() < size) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      received_.append(buffer, static_cast<size_t>(n));
    }
    return true;
  }
  // Reads until `text` occurs at or after `from`; its position in `at`.
  bool find_from(const std::string& text, size_t from, size_t& at) {
    char buffer[16384];
    while ((at = received_.find(text, from)) == std::string::npos) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      received_.append(buffer, static_cast<size_t>(n));
    }
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
  size_t consumed_ = 0;  // bytes of received_ that read_response() took
};

// Polls `condition` every 20 ms until it holds or `seconds` pass (times emulated_time_factor(): under qemu-user the
// model runs ~20x slower, and what it waits for comes that much later).
template <typename Condition>
bool eventually(Condition condition, double seconds = 10) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds * emulated_time_factor());
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

// `nvfp4lm serve ARGS --port 0` as a child process, stderr to a log file; port() waits for its "listening on" line.
class ServeProcess {
 public:
  explicit ServeProcess(const std::vector<std::string>& args) : log_(log_dir_ / "serve.log") {
    std::vector<std::string> argv_text = nvfp4lm_argv();
    for (const char* word : {"serve", "--port", "0"}) argv_text.push_back(word);
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& arg : argv_text) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    spawned_ = posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // The port from "listening on http://HOST:PORT", or -1 when the process ended or 30 s passed.
  int port() {
    int found = -1;
    eventually(
        [&] {
          const std::string text = log();
          std::smatch match;
          if (std::regex_search(text, match, std::regex("listening on http://[0-9.]+:([0-9]+)")))
            found = std::stoi(match[1]);
          return found > 0 || !running();
        },
        30);
    return found;
  }
  bool running() {
    if (exited_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return !exited_;
  }
  void signal(int number) { ::kill(pid_, number); }
  // Waits up to `seconds` for the exit; its code, or -1 if it still runs.
  int wait_exit(double seconds) {
    eventually([&] { return !running(); }, seconds);
    return exited_ ? exit_code_ : -1;
  }
  std::string log() const { return read_file(log_); }
  bool spawned() const { return spawned_; }

 private:
  TempDir log_dir_;
  fs::path log_;
  pid_t pid_ = -1;
  bool spawned_ = false;
  bool exited_ = false;
  int exit_code_ = -1;
};

// <build>/npm with the official `openai` npm client (a dev-only dependency, installed on demand), or an empty path
// with `skip_reason` set when npm / node are missing or the registry cannot be reached.
inline fs::path installed_openai_client(std::string& skip_reason) {
  return installed_npm_package("npm", "openai@7", fs::path("node_modules") / "openai" / "package.json", skip_reason);
}

}  // namespace nvfp4lm::test
