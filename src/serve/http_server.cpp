// See http_server.h. Boost.Asio / Beast are included by the serve/http_*.cpp files only: the rest of serve/ (and
// everything that includes server.h) never sees them.
#include "serve/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cctype>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/json_text.h"
#include "core/logging.h"
#include "core/memory.h"
#include "serve/http_completion.h"
#include "serve/http_connection.h"
#include "serve/tokenize_endpoint.h"

namespace nvfp4lm::serve {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;
using nlohmann::json;

// Open files that are not client connections: the model's files, pipes, OpenMP and OpenBLAS, logs.
constexpr rlim_t kOtherFiles = 256;
// A failed accept (out of file descriptors) is retried after this pause rather than at once, in a loop.
constexpr auto kAcceptRetry = std::chrono::milliseconds(50);
// Log lines about closed connections: at most this many a second for each reason; the rest are counted and the
// count is said in the next line (the metric counts every one).
constexpr int kClosedLinesPerSecond = 5;

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5));
}

HttpReply json_reply(int status, const json& body) { return {status, "application/json", to_json_text(body), {}}; }

// The routes: which methods each path takes (405 with Allow lists them) and the label it has in /metrics.
enum class Route {
  Health,
  Metrics,
  Models,
  Model,
  ChatCompletions,
  Completions,
  Tokenize,
  Detokenize,
  ApplyTemplate,
  Unknown
};

struct RouteMatch {
  Route route = Route::Unknown;
  std::string model_id;  // Route::Model
  const char* allow = "";
  const char* label = "other";  // requests_total{endpoint}; /health and /metrics are not counted
};

// "%41" -> "A" in a path segment; nullopt when a '%' is not followed by two hex digits.
std::optional<std::string> percent_decoded(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(text[i + 2])))
      return std::nullopt;
    out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
    i += 2;
  }
  return out;
}

RouteMatch match_route(std::string_view path) {
  constexpr std::string_view kModelPrefix = "/v1/models/";
  if (path == "/health") return {Route::Health, {}, "GET, HEAD", ""};
  if (path == "/metrics") return {Route::Metrics, {}, "GET, HEAD", ""};
  if (path == "/v1/models") return {Route::Models, {}, "GET, HEAD", "/v1/models"};
  if (path == "/v1/chat/completions") return {Route::ChatCompletions, {}, "POST", "/v1/chat/completions"};
  if (path == "/v1/completions") return {Route::Completions, {}, "POST", "/v1/completions"};
  if (path == "/tokenize") return {Route::Tokenize, {}, "POST", "/tokenize"};
  if (path == "/detokenize") return {Route::Detokenize, {}, "POST", "/detokenize"};
  if (path == "/apply-template") return {Route::ApplyTemplate, {}, "POST", "/apply-template"};
  if (path.size() > kModelPrefix.size() && path.substr(0, kModelPrefix.size()) == kModelPrefix)
    return {Route::Model, std::string(path.substr(kModelPrefix.size())), "GET, HEAD", "/v1/models/{id}"};
  return {};
}

// A path for an error message, cut to a readable length.
std::string excerpt(std::string_view text) {
  constexpr size_t kMaxChars = 120;
  return text.size() <= kMaxChars ? std::string(text) : std::string(text.substr(0, kMaxChars)) + "...";
}

bool method_allowed(const RouteMatch& match, http::verb method) {
  if (std::string_view(match.allow) == "POST") return method == http::verb::post;
  return method == http::verb::get || method == http::verb::head;
}

}  // namespace

struct HttpServer::Impl final : HttpConnectionHost {
  Scheduler& scheduler;
  ServeMetrics& metrics;
  ServedModel model;
  HttpOptions options;
  HttpLimits limits;
  int64_t max_connections = 0;
  int port = 0;
  int64_t created = std::time(nullptr);
  std::atomic<bool> draining{false};
  std::atomic<bool> stopping{false};

  // Open connections (the limit, /metrics, drain and stop reach them here). Declared before the io_context: the
  // io_context's destruction destroys the last handlers, whose connections then unregister here.
  mutable std::mutex connections_mutex;
  std::unordered_map<const HttpConnection*, std::weak_ptr<HttpConnection>> connections;

  std::mutex log_mutex;
  std::unordered_map<std::string, std::pair<std::chrono::steady_clock::time_point, int>> log_window;  // per reason
  std::unordered_map<std::string, int64_t> log_suppressed;

  CompletionService completions;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::vector<std::thread> threads;

  Impl(Scheduler& scheduler, ServeMetrics& metrics, ServedModel model_in, HttpOptions options_in)
      : scheduler(scheduler),
        metrics(metrics),
        model(std::move(model_in)),
        options(std::move(options_in)),
        completions(scheduler, metrics, model, options.model_name, options.prepare_threads) {
    limits.idle = milliseconds(options.idle_timeout_s);
    limits.header = milliseconds(options.header_timeout_s);
    limits.body = milliseconds(options.body_timeout_s);
    limits.write = milliseconds(options.write_timeout_s);
    limits.max_body_bytes = options.max_body_bytes;
  }

  void bind();
  void raise_file_limit();
  void accept();
  void accepted(tcp::socket socket);
  void refuse_connection(tcp::socket& socket);
  template <typename Fn>
  void each_connection(Fn fn);
  int64_t open_connections() const {
    const std::lock_guard<std::mutex> lock(connections_mutex);
    return static_cast<int64_t>(connections.size());
  }
  // The API key guards what reads or runs the model: /v1/*, /tokenize, /detokenize (not /health, /metrics).
  static bool guarded(std::string_view path) {
    return path.substr(0, 4) == "/v1/" || path == "/tokenize" || path == "/detokenize" || path == "/apply-template";
  }
  // The CORS headers for a request from `origin` ("" when it sent none): empty unless the origin is allowed.
  std::vector<std::pair<std::string, std::string>> cors_headers(std::string_view origin) const {
    if (origin.empty() || options.cors_origins.empty()) return {};
    for (const std::string& allowed : options.cors_origins)
      if (allowed == "*" || allowed == origin)
        return {{"Access-Control-Allow-Origin", allowed == "*" ? "*" : std::string(origin)}, {"Vary", "Origin"}};
    return {};
  }
  bool authorized(const HttpRequest& request) const {
    return options.api_key.empty() || request[http::field::authorization] == "Bearer " + options.api_key;
  }
  // The served model, or (adapter) one of its LoRA adapters, which vLLM lists with the base as "parent".
  json model_object(int adapter = kNoLoraAdapter) const {
    json object = {{"id", options.model_name},
                   {"object", "model"},
                   {"created", created},
                   {"owned_by", "nvfp4lm"},
                   {"root", options.model_name},
                   {"parent", nullptr},
                   {"max_model_len", model.rules.context}};
    if (adapter != kNoLoraAdapter) {
      object["id"] = model.lora_adapters[static_cast<size_t>(adapter)];
      object["root"] = model.lora_adapters[static_cast<size_t>(adapter)];
      object["parent"] = options.model_name;
    }
    return object;
  }
  void log_closed(std::string_view reason, const std::string& line);

  // HttpConnectionHost
  void handle(const std::shared_ptr<HttpConnection>& connection, HttpRequest& request) override;
  void answered(const HttpConnection& connection, const std::string& request_line, int status, uint64_t bytes,
                double seconds, bool completed) override {
    if (!options.access_log) return;
    log::info("serve: {} \"{}\" {} {} bytes {:.3f} s{}", connection.peer(), request_line,
              status == 0 ? std::string("-") : std::to_string(status), bytes, seconds,
              completed ? "" : " (cut short: the connection closed)");
  }
  std::optional<HttpReply> refuse_header(const HttpRequest& request) override;
  HttpReply unreadable_request(int status, const std::string& message) override {
    metrics.count_request("other", std::to_string(status));
    return api_error_reply(ApiError(status, "invalid_request_error", message));
  }
  void closed_by_limit(const HttpConnection& connection, std::string_view reason, const std::string& why) override {
    metrics.count_connection_closed(reason);
    log_closed(reason, fmt::format("serve: closed the connection from {}: {}", connection.peer(), why));
  }
  void ended(const HttpConnection* connection) override {
    const std::lock_guard<std::mutex> lock(connections_mutex);
    connections.erase(connection);
  }
};

std::optional<HttpReply> HttpServer::Impl::refuse_header(const HttpRequest& request) {
  const std::string_view target = request.target();
  const std::string_view path = target.substr(0, target.find('?'));
  const char* label = match_route(path).label;
  auto refused = [&](const ApiError& error) {
    if (*label != '\0') metrics.count_request(label, std::to_string(error.status()));
    return api_error_reply(error);
  };
  // RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any HTTP/1.1 request message that
  // lacks a Host header field".
  if (request.version() == 11 && request.find(http::field::host) == request.end())
    return refused(ApiError(400, "invalid_request_error", "an HTTP/1.1 request needs a Host header (RFC 9112 §3.2)"));
  // The key is checked on the header, so an unauthenticated client never gets its body read (a CORS preflight
  // carries no key: handle() answers it).
  if (request.method() != http::verb::options && guarded(path) && !authorized(request))
    return refused(ApiError(401, "invalid_request_error",
                            "Incorrect API key provided: send the server's key as 'Authorization: Bearer KEY'", {},
                            "invalid_api_key"));
  return std::nullopt;
}

void HttpServer::Impl::handle(const std::shared_ptr<HttpConnection>& connection, HttpRequest& request) {
  const std::string_view target = request.target();
  const std::string_view path = target.substr(0, target.find('?'));
  const RouteMatch match = match_route(path);
  auto answer = [&](const HttpReply& reply) {
    if (*match.label != '\0') metrics.count_request(match.label, std::to_string(reply.status));
    connection->reply(reply);
  };
  const auto origin = request[http::field::origin];
  std::vector<std::pair<std::string, std::string>> cors = cors_headers(std::string_view(origin.data(), origin.size()));
  const bool cors_allowed = !cors.empty();
  connection->add_answer_headers(std::move(cors));
  if (request.method() == http::verb::options && match.route != Route::Unknown) {
    // A CORS preflight (or a client asking what a route takes): no API key, as browsers send none here.
    HttpReply reply{204, "", "", {{"Allow", fmt::format("{}, OPTIONS", match.allow)}}};
    if (cors_allowed) {
      reply.headers.emplace_back("Access-Control-Allow-Methods", fmt::format("{}, OPTIONS", match.allow));
      const auto wanted = request[http::field::access_control_request_headers];
      reply.headers.emplace_back("Access-Control-Allow-Headers", wanted.empty()
                                                                     ? std::string("Authorization, Content-Type")
                                                                     : std::string(wanted.data(), wanted.size()));
      reply.headers.emplace_back("Access-Control-Max-Age", "600");
    }
    return connection->reply(reply);
  }
  if (match.route == Route::Unknown)
    return answer(api_error_reply(
        ApiError(404, "invalid_request_error",
                 fmt::format("no route for {} {} (see GET /v1/models, POST /v1/chat/completions, POST /v1/completions)",
                             std::string_view(request.method_string()), excerpt(path)))));
  if (!method_allowed(match, request.method())) {
    HttpReply reply = api_error_reply(ApiError(
        405, "invalid_request_error",
        fmt::format("{} takes {}, not {}", excerpt(path), match.allow, std::string_view(request.method_string()))));
    reply.headers.emplace_back("Allow", fmt::format("{}, OPTIONS", match.allow));
    return answer(reply);
  }
  switch (match.route) {
    case Route::Health:
      return connection->reply(draining ? json_reply(503, {{"status", "shutting down"}})
                                        : json_reply(200, {{"status", "ok"}}));
    case Route::Metrics: {
      MetricGauges gauges;
      gauges.waiting = scheduler.waiting();
      gauges.running = scheduler.running();
      gauges.slots = model.slots;
      gauges.context = model.rules.context;
      gauges.device = model.device;
      gauges.device_bytes = MemoryTracker::instance().current_bytes(Device::parse(model.device));
      gauges.rss_bytes = current_rss_bytes();
      gauges.connections = open_connections();
      return connection->reply({200, "text/plain; version=0.0.4", metrics.render(gauges), {}});
    }
    case Route::Models: {
      json data = json::array({model_object()});
      for (size_t k = 0; k < model.lora_adapters.size(); ++k) data.push_back(model_object(static_cast<int>(k)));
      return answer(json_reply(200, {{"object", "list"}, {"data", std::move(data)}}));
    }
    case Route::Model: {
      const std::optional<std::string> id = percent_decoded(match.model_id);
      const std::optional<int> adapter = id && !id->empty() ? model.adapter_for(*id, options.model_name) : std::nullopt;
      if (adapter) return answer(json_reply(200, model_object(*adapter)));
      return answer(api_error_reply(ApiError(404, "invalid_request_error",
                                             fmt::format("The model '{}' does not exist; this server serves '{}'",
                                                         excerpt(id ? *id : match.model_id), options.model_name),
                                             "model", "model_not_found")));
    }
    case Route::ChatCompletions:
    case Route::Completions:
      return completions.answer(
          connection, match.route == Route::ChatCompletions ? Endpoint::ChatCompletions : Endpoint::Completions,
          std::move(request.body()));
    case Route::Tokenize:
    case Route::Detokenize:
    case Route::ApplyTemplate: {
      const Route route = match.route;
      return completions.answer_json(
          connection, match.label, [this, route, body = std::move(request.body())]() -> json {
            // Ordered, as the completion endpoints read their bodies (tools keep their key order).
            OrderedJsonParseResult parsed = try_parse_ordered_json(body);
            if (!parsed.ok())
              throw invalid_request(fmt::format("the request body is not valid JSON: {}", parsed.error));
            if (route == Route::Tokenize)
              return tokenize_answer(parsed.value, model.tokenizer, model.rules, model.defaults);
            if (route == Route::ApplyTemplate) return apply_template_answer(parsed.value, model.rules, model.defaults);
            return detokenize_answer(json(parsed.value), model.tokenizer, model.rules);
          });
    }
    case Route::Unknown:
      break;
  }
}

void HttpServer::Impl::log_closed(std::string_view reason, const std::string& line) {
  const auto now = std::chrono::steady_clock::now();
  const std::lock_guard<std::mutex> lock(log_mutex);
  auto& [window_start, lines] = log_window[std::string(reason)];
  if (now - window_start >= std::chrono::seconds(1)) {
    window_start = now;
    lines = 0;
  }
  int64_t& suppressed = log_suppressed[std::string(reason)];
  if (lines++ >= kClosedLinesPerSecond) {
    ++suppressed;
    return;
  }
  if (suppressed > 0) {
    log::info("{} (and {} more for {} before it)", line, suppressed, reason);
    suppressed = 0;
  } else {
    log::info("{}", line);
  }
}

void HttpServer::Impl::raise_file_limit() {
  const auto needed = static_cast<rlim_t>(options.max_connections) + kOtherFiles;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < needed && limit.rlim_cur != RLIM_INFINITY) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  max_connections = options.max_connections;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    max_connections = std::max<int64_t>(1, static_cast<int64_t>(limit.rlim_cur) - static_cast<int64_t>(kOtherFiles));
    log::warn("serve: the open-file limit ({}, ulimit -n) leaves room for {} connections, not --max-connections {}",
              limit.rlim_cur, max_connections, options.max_connections);
  }
}

void HttpServer::Impl::bind() {
  const std::string& host = options.host;
  auto fail = [&](const std::string& why) {
    NVFP4LM_FAIL("serve: cannot listen on {}:{}: {} (is another server using the port? pick another with --port)", host,
                 options.port, why);
  };
  boost::system::error_code error;
  tcp::endpoint endpoint;
  const asio::ip::address address = asio::ip::make_address(host, error);
  if (!error) {
    endpoint = tcp::endpoint(address, static_cast<uint16_t>(options.port));
  } else {
    tcp::resolver resolver(io);
    const auto results = resolver.resolve(host, std::to_string(options.port), tcp::resolver::passive, error);
    if (error || results.empty()) fail(error ? error.message() : "the host name has no address");
    endpoint = results.begin()->endpoint();
  }
  // SO_REUSEADDR only: a restart may reuse a port in TIME_WAIT, but a second server may not share a port in use.
  acceptor.open(endpoint.protocol(), error);
  if (!error) acceptor.set_option(tcp::acceptor::reuse_address(true), error);
  if (!error) acceptor.bind(endpoint, error);
  if (!error) acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) fail(error.message());
  port = acceptor.local_endpoint().port();
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(io), [this](const boost::system::error_code& error, tcp::socket socket) {
    if (stopping || error == asio::error::operation_aborted) return;
    if (error) {
      // Out of file descriptors (or a similar condition that passes): say so, and try again shortly.
      log_closed("accept_failed", fmt::format("serve: cannot accept a connection: {}", error.message()));
      accept_retry.expires_after(kAcceptRetry);
      accept_retry.async_wait([this](const boost::system::error_code& wait_error) {
        if (!wait_error && !stopping) accept();
      });
      return;
    }
    accepted(std::move(socket));
    accept();
  });
}

void HttpServer::Impl::accepted(tcp::socket socket) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // server-sent events are small writes that must go out at once
  if (options.send_buffer_bytes > 0)
    socket.set_option(asio::socket_base::send_buffer_size(options.send_buffer_bytes), ignored);
  if (open_connections() >= max_connections) return refuse_connection(socket);
  auto connection = std::make_shared<HttpConnection>(std::move(socket), *this, limits);
  {
    const std::lock_guard<std::mutex> lock(connections_mutex);
    connections.emplace(connection.get(), connection);
  }
  if (draining) connection->drain();
  connection->start();
}

void HttpServer::Impl::refuse_connection(tcp::socket& socket) {
  metrics.count_connection_closed("connection_limit");
  boost::system::error_code error;
  const auto remote = socket.remote_endpoint(error);
  log_closed("connection_limit",
             fmt::format("serve: refused the connection from {}: {} connections are open (--max-connections)",
                         error ? "an unknown peer" : remote.address().to_string(), max_connections));
  // One non-blocking write: the answer fits an empty socket buffer, and a client that is not reading loses it.
  const ApiError busy(503, "service_unavailable",
                      fmt::format("the server has {} open connections, its limit; retry later", max_connections), {},
                      "too_many_connections");
  const HttpReply reply = api_error_reply(busy);
  std::string text = fmt::format("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n");
  for (const auto& [name, value] : reply.headers) text += fmt::format("{}: {}\r\n", name, value);
  text += fmt::format("Content-Length: {}\r\nConnection: close\r\n\r\n{}", reply.body.size(), reply.body);
  socket.non_blocking(true, error);
  if (!error) socket.write_some(asio::buffer(text), error);
  socket.shutdown(tcp::socket::shutdown_both, error);
  socket.close(error);
}

template <typename Fn>
void HttpServer::Impl::each_connection(Fn fn) {
  std::vector<std::shared_ptr<HttpConnection>> open;
  {
    const std::lock_guard<std::mutex> lock(connections_mutex);
    for (const auto& [key, weak] : connections)
      if (auto connection = weak.lock()) open.push_back(std::move(connection));
  }
  for (const auto& connection : open) fn(*connection);
}

HttpServer::HttpServer(Scheduler& scheduler, ServeMetrics& metrics, ServedModel model, HttpOptions options)
    : impl_(std::make_unique<Impl>(scheduler, metrics, std::move(model), std::move(options))) {
  const HttpOptions& checked = impl_->options;
  NVFP4LM_CHECK(checked.max_connections >= 1, "--max-connections must be at least 1, got {}", checked.max_connections);
  for (const double seconds :
       {checked.idle_timeout_s, checked.header_timeout_s, checked.body_timeout_s, checked.write_timeout_s})
    NVFP4LM_CHECK(seconds > 0, "serve: the connection timeouts must be positive, got {:g} s", seconds);
  impl_->raise_file_limit();
  impl_->bind();
}

HttpServer::~HttpServer() { stop(std::chrono::steady_clock::now()); }

int HttpServer::bound_port() const { return impl_->port; }

void HttpServer::start() {
  if (!impl_->threads.empty() || impl_->stopping) return;
  impl_->accept();
  for (int i = 0; i < std::max(1, impl_->options.io_threads); ++i)
    impl_->threads.emplace_back([this] { impl_->io.run(); });
}

void HttpServer::set_draining() {
  impl_->draining = true;
  impl_->completions.set_draining();
  impl_->each_connection([](HttpConnection& connection) { connection.drain(); });
}

void HttpServer::stop(std::chrono::steady_clock::time_point deadline) {
  Impl& impl = *impl_;
  if (impl.stopping.exchange(true)) return;
  impl.draining = true;
  impl.completions.set_draining();
  asio::post(impl.io, [&impl] {
    boost::system::error_code ignored;
    impl.acceptor.close(ignored);
    impl.accept_retry.cancel();
  });
  impl.each_connection([](HttpConnection& connection) { connection.drain(/*close_unanswered=*/true); });
  while ((impl.completions.active() > 0 || impl.open_connections() > 0) &&
         std::chrono::steady_clock::now() < deadline && !impl.threads.empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl.each_connection([](HttpConnection& connection) { connection.close(); });
  impl.completions.stop();
  // Closed connections finish their last handlers; then nothing is left to run and the threads return.
  const auto wait_end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (impl.open_connections() > 0 && std::chrono::steady_clock::now() < wait_end && !impl.threads.empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  impl.io.stop();
  for (std::thread& thread : impl.threads) thread.join();
  impl.threads.clear();
}

int64_t HttpServer::active_requests() const { return impl_->completions.active(); }

std::optional<int> ServedModel::adapter_for(std::string_view requested, std::string_view model_name) const {
  if (requested.empty() || requested == model_name) return kNoLoraAdapter;
  for (size_t k = 0; k < lora_adapters.size(); ++k)
    if (lora_adapters[k] == requested) return static_cast<int>(k);
  return std::nullopt;
}

}  // namespace nvfp4lm::serve
