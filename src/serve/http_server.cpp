// See http_server.h. cpp-httplib is included here only: the rest of serve/ never sees it.
#include "serve/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/json_text.h"
#include "core/logging.h"
#include "core/memory.h"
#include "serve/api_error.h"
#include "serve/openai_response.h"

namespace nvfp4lm::serve {
namespace {

using nlohmann::json;

constexpr auto kWaitSlice = std::chrono::milliseconds(50);
constexpr int kListenBacklog = 1024;

void reply_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void reply_error(httplib::Response& res, const ApiError& error) { reply_json(res, error.status(), error.body()); }

// Counts a handler in flight (HttpServer::active_requests) for its whole life, the answer's writing included.
class ActiveRequest {
 public:
  explicit ActiveRequest(std::atomic<int64_t>& count) : count_(count) { ++count_; }
  ~ActiveRequest() { --count_; }
  ActiveRequest(const ActiveRequest&) = delete;
  ActiveRequest& operator=(const ActiveRequest&) = delete;

 private:
  std::atomic<int64_t>& count_;
};

// The state a chunked answer keeps between calls of its content provider.
struct Answer {
  std::shared_ptr<RequestChannel> channel;
  CompletionResponse response;
  std::shared_ptr<ActiveRequest> active;
  bool complete = false;
};

}  // namespace

struct HttpServer::Impl {
  HttpServer& owner;
  Scheduler& scheduler;
  ServeMetrics& metrics;
  ServedModel model;
  HttpOptions options;
  httplib::Server server;
  int port = 0;
  std::atomic<bool> draining{false};
  std::atomic<bool> listen_returned{false};
  int64_t created = std::time(nullptr);
  std::mutex random_mutex;
  std::mt19937_64 random{std::random_device{}()};

  Impl(HttpServer& owner, Scheduler& scheduler, ServeMetrics& metrics, ServedModel model, HttpOptions options)
      : owner(owner), scheduler(scheduler), metrics(metrics), model(std::move(model)), options(std::move(options)) {}

  uint64_t random_u64() {
    const std::lock_guard<std::mutex> lock(random_mutex);
    return random();
  }

  std::string response_id(Endpoint endpoint) {
    return fmt::format("{}-{:016x}{:08x}", endpoint == Endpoint::ChatCompletions ? "chatcmpl" : "cmpl", random_u64(),
                       static_cast<uint32_t>(random_u64()));
  }

  json model_object() const {
    return {{"id", options.model_name},
            {"object", "model"},
            {"created", created},
            {"owned_by", "nvfp4lm"},
            {"max_model_len", model.rules.context}};
  }

  bool authorized(const httplib::Request& req) const {
    return options.api_key.empty() || req.get_header_value("Authorization") == "Bearer " + options.api_key;
  }

  void routes();
  void completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void answer(httplib::Response& res, const CompletionRequest& request, std::shared_ptr<RequestChannel> channel,
              std::shared_ptr<ActiveRequest> active);
  void finish(Answer& answer, bool success, Endpoint endpoint);
};

void HttpServer::Impl::routes() {
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/v1/", 0) == 0 && !authorized(req)) {
      reply_error(res, ApiError(401, "invalid_request_error",
                                "Incorrect API key provided: send the server's key as 'Authorization: Bearer KEY'", {},
                                "invalid_api_key"));
      metrics.count_request(req.path, "401");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors httplib answers itself (unknown route, body too large, unreadable request) get an OpenAI error body.
  server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message;
    if (res.status == 404) {
      message = fmt::format("no route for {} {} (see GET /v1/models, POST /v1/chat/completions, POST /v1/completions)",
                            req.method, req.path);
    } else if (res.status == 413) {
      message = fmt::format("the request body is larger than this server's limit of {} bytes", options.max_body_bytes);
    } else {
      message = fmt::format("the request could not be read (HTTP status {})", res.status);
    }
    reply_error(res, ApiError(res.status, res.status >= 500 ? "server_error" : "invalid_request_error", message));
    metrics.count_request(req.path, std::to_string(res.status));
  });
  server.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr error) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log::error("serve: {} {} failed: {}", req.method, req.path, what);
    reply_error(res, ApiError(500, "server_error", fmt::format("internal error: {}", what)));
  });

  server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining) return reply_json(res, 503, {{"status", "shutting down"}});
    reply_json(res, 200, {{"status", "ok"}});
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    MetricGauges gauges;
    gauges.waiting = scheduler.waiting();
    gauges.running = scheduler.running();
    gauges.slots = model.slots;
    gauges.context = model.rules.context;
    gauges.device = model.device;
    gauges.device_bytes = MemoryTracker::instance().current_bytes(Device::parse(model.device));
    gauges.rss_bytes = current_rss_bytes();
    res.set_content(metrics.render(gauges), "text/plain; version=0.0.4");
  });
  server.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    reply_json(res, 200, {{"object", "list"}, {"data", json::array({model_object()})}});
    metrics.count_request(req.path, "200");
  });
  server.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != options.model_name) {
      reply_error(res, ApiError(404, "invalid_request_error",
                                fmt::format("The model '{}' does not exist; this server serves '{}'",
                                            std::string(req.matches[1]), options.model_name),
                                "model", "model_not_found"));
      return;
    }
    reply_json(res, 200, model_object());
  });
  server.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(req, res, Endpoint::ChatCompletions);
  });
  server.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(req, res, Endpoint::Completions);
  });
}

void HttpServer::Impl::completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  auto active = std::make_shared<ActiveRequest>(owner.active_);
  try {
    if (draining)
      throw ApiError(503, "service_unavailable", "the server is shutting down; retry against another instance", {},
                     "server_shutting_down");
    JsonParseResult parsed = try_parse_json(req.body);
    if (!parsed.ok()) throw invalid_request(fmt::format("the request body is not valid JSON: {}", parsed.error));
    const CompletionRequest request = parse_completion_request(parsed.value, endpoint, model.defaults);
    if (!request.ignored.empty())
      log::debug("serve: {} ignores unknown field(s) {}", endpoint_path(endpoint), fmt::join(request.ignored, ", "));
    if (!request.model.empty() && request.model != options.model_name)
      throw ApiError(404, "invalid_request_error",
                     fmt::format("The model '{}' does not exist; this server serves '{}' (GET /v1/models)",
                                 request.model, options.model_name),
                     "model", "model_not_found");
    SequenceSpec spec = to_sequence_spec(request, model.tokenizer, model.rules, random_u64());
    answer(res, request, scheduler.submit(std::move(spec)), std::move(active));
  } catch (const ApiError& error) {
    reply_error(res, error);
    metrics.count_request(endpoint_path(endpoint), std::to_string(error.status()));
  }
}

void HttpServer::Impl::finish(Answer& state, bool success, Endpoint endpoint) {
  if (const auto error = state.channel->error()) {
    metrics.count_request(endpoint_path(endpoint), std::to_string(error->status()));
    return;
  }
  if (success && state.complete) {
    metrics.count_request(endpoint_path(endpoint), "200");
    return;
  }
  // The client went away (or a write failed): drop the sequence, free its slot.
  state.channel->cancel();
  scheduler.notify();
  metrics.count_request(endpoint_path(endpoint), "cancelled");
}

void HttpServer::Impl::answer(httplib::Response& res, const CompletionRequest& request,
                              std::shared_ptr<RequestChannel> channel, std::shared_ptr<ActiveRequest> active) {
  const Endpoint endpoint = request.endpoint;
  auto state = std::make_shared<Answer>(Answer{
      std::move(channel),
      CompletionResponse(request, model.tokenizer, response_id(endpoint), std::time(nullptr), options.model_name),
      std::move(active)});
  const bool stream = request.stream;
  auto provider = [state, stream](size_t, httplib::DataSink& sink) {
    std::vector<SequenceEvent> events;
    const bool closed = state->channel->wait(events, kWaitSlice);
    std::string out;
    for (const SequenceEvent& event : events) out += state->response.add(event);
    const std::optional<ApiError> error = closed ? state->channel->error() : std::nullopt;
    if (closed) {
      if (stream) {
        out += error ? CompletionResponse::stream_error(*error) : state->response.stream_end();
      } else if (error) {
        // The status line went out already: end the connection without the last chunk.
        log::error("serve: a request failed after its answer began: {}", error->what());
        return false;
      } else {
        out = state->response.body().dump();
      }
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;
    if (closed) {
      state->complete = true;
      sink.done();
      return true;
    }
    return out.empty() ? sink.is_writable() : true;
  };
  if (stream) res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(stream ? "text/event-stream" : "application/json", provider,
                                   [this, state, endpoint](bool success) { finish(*state, success, endpoint); });
}

HttpServer::HttpServer(Scheduler& scheduler, ServeMetrics& metrics, ServedModel model, HttpOptions options)
    : impl_(std::make_unique<Impl>(*this, scheduler, metrics, std::move(model), std::move(options))) {
  httplib::Server& server = impl_->server;
  const int64_t threads = std::max<int64_t>(4, impl_->options.threads);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server.set_payload_max_length(impl_->options.max_body_bytes);
  server.set_keep_alive_max_count(1000);
  // An idle keep-alive connection holds its thread until this passes, also when the server stops (0.11.4's wait
  // for the next request does not look at the listener): short, so that shutdown is not held up by idle clients.
  server.set_keep_alive_timeout(2);
  server.set_read_timeout(30);
  server.set_write_timeout(30);
  impl_->routes();
  // cpp-httplib's default socket options set SO_REUSEPORT, which lets a second server bind a port in use without an
  // error; SO_REUSEADDR only (a restart may reuse a port in TIME_WAIT). The listening socket is kept to widen its
  // backlog below.
  int listening = -1;
  server.set_socket_options([&listening](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listening = sock;
  });
  const std::string& host = impl_->options.host;
  errno = 0;
  if (impl_->options.port == 0) {
    impl_->port = server.bind_to_any_port(host);
  } else if (server.bind_to_port(host, impl_->options.port)) {
    impl_->port = impl_->options.port;
  } else {
    impl_->port = -1;
  }
  NVFP4LM_CHECK(impl_->port > 0,
                "serve: cannot listen on {}:{}: {} (is another server using the port? pick another with --port)", host,
                impl_->options.port, errno != 0 ? std::strerror(errno) : "the address cannot be bound");
  // 0.11.4 listens with a backlog of 5: a burst of clients on a busy machine would overflow it before the listener
  // thread accepts them, and Linux then drops connections that the clients already count as open. Listening again
  // on the same socket only changes the backlog.
  NVFP4LM_CHECK(::listen(listening, kListenBacklog) == 0, "serve: cannot set the listen backlog on {}:{}: {}", host,
                impl_->port, std::strerror(errno));
}

HttpServer::~HttpServer() = default;

int HttpServer::bound_port() const { return impl_->port; }

void HttpServer::listen() {
  impl_->server.listen_after_bind();
  impl_->listen_returned = true;
}

void HttpServer::stop() {
  // httplib's stop() does nothing before listen() has set the server running: wait for that (or for listen() to
  // have returned), or a stop right after the start would leave the listener running forever.
  while (!impl_->server.is_running() && !impl_->listen_returned)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->server.stop();
}

void HttpServer::set_draining() { impl_->draining = true; }

}  // namespace nvfp4lm::serve
