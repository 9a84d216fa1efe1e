// Helpers for the serve tests: a tiny synthesized model (bundled tokenizer) shared by a test executable, an
// in-process server on a free loopback port, HTTP calls through cpp-httplib's client, a raw socket for requests a
// client library would not send (a stream abandoned half way), and `nvfp4lm serve` as a child process.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "common/test_util.h"
#include "model/qwen3_model.h"
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
  httplib::Client client(const std::string& api_key = "") const {
    httplib::Client client("127.0.0.1", port());
    client.set_read_timeout(60);
    if (!api_key.empty()) client.set_bearer_token_auth(api_key);
    return client;
  }

 private:
  std::unique_ptr<serve::Server> server_;
  std::thread thread_;
};

struct HttpResult {
  int status = 0;
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body); }
};

inline HttpResult post_json(const httplib::Client& const_client, const std::string& path, const std::string& body) {
  httplib::Client& client = const_cast<httplib::Client&>(const_client);
  const httplib::Result result = client.Post(path, body, "application/json");
  if (!result) return {-1, httplib::to_string(result.error())};
  return {result->status, result->body};
}

inline HttpResult get(const httplib::Client& const_client, const std::string& path) {
  httplib::Client& client = const_cast<httplib::Client&>(const_client);
  const httplib::Result result = client.Get(path);
  if (!result) return {-1, httplib::to_string(result.error())};
  return {result->status, result->body};
}

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

// A plain TCP connection to the server: the test writes raw HTTP and reads what comes back.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    timeval timeout{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~RawConnection() { close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  void send_post(const std::string& path, const std::string& body) {
    const std::string request = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_EQ(::send(fd_, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  }
  // Reads until `text` has arrived (true) or the peer closes / 5 s pass (false).
  bool read_until(const std::string& text) {
    char buffer[4096];
    while (received_.find(text) == std::string::npos) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      received_.append(buffer, static_cast<size_t>(n));
    }
    return true;
  }
  const std::string& received() const { return received_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

// Polls `condition` every 20 ms until it holds or `seconds` pass.
template <typename Condition>
bool eventually(Condition condition, double seconds = 10) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
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
    std::vector<std::string> argv_text = {NVFP4LM_BINARY_PATH, "serve", "--port", "0"};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& arg : argv_text) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    spawned_ = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) == 0;
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

}  // namespace nvfp4lm::test
