// The HTTP face of `nvfp4lm serve`, event-driven on Boost.Asio + Boost.Beast (docs/DESIGN.md §8 says why):
//   POST /v1/chat/completions, POST /v1/completions   OpenAI API (openai_request.h / openai_response.h)
//   GET  /v1/models, /v1/models/{id}                  the one served model
//   GET  /health                                      200 {"status": "ok"}, 503 while shutting down
//   GET  /metrics                                     Prometheus text (metrics.h)
//   POST /tokenize, /detokenize                       text or chat messages <-> token ids (tokenize_endpoint.h)
//   OPTIONS on any route                              204 with Allow (a CORS preflight with --cors-origin)
// With an API key, /v1/* needs "Authorization: Bearer KEY" (else 401). Every error is an OpenAI error object
// (api_error.h): 400 bad HTTP, bad JSON (invalid UTF-8 included) or bad fields, 401, 404 unknown route or model, 405
// a route's wrong method (with Allow), 413 a body over max_body_bytes (chunked too), 429 queue full and 503 shutting
// down or too many connections (both with Retry-After), 431 a header over its limit, 500.
//
// Threads: io_threads (1) run every connection (http_connection.h: deadlines, pipelining, streaming), the
// acceptor, /health, /metrics and /v1/models; none of them ever waits for the model or a client. Completion
// requests are parsed, checked and tokenized on prepare_threads (2) — a long prompt takes a while to tokenize — and
// submitted to the scheduler at once, so the queue bound (--max-queue, 429) sees every request that arrived. The
// scheduler's events come back through the request's channel, which posts a wake-up to the connection's strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/metrics.h"
#include "serve/openai_request.h"
#include "serve/scheduler.h"
#include "serve/sequence_request.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see bound_port)
  std::string api_key;
  std::string model_name;
  uint64_t max_body_bytes = uint64_t{8} << 20;
  int64_t max_connections = 4096;  // open at once; more are answered 503 and closed
  double idle_timeout_s = 60;      // no request on a connection (fresh or keep-alive)
  double header_timeout_s = 10;    // from a request's first byte to the end of its header
  double body_timeout_s = 60;      // from the end of the header to the end of the body
  double write_timeout_s = 30;     // one write of an answer (a client that does not read)
  int io_threads = 1;              // threads running the connections
  int prepare_threads = 2;         // threads parsing and tokenizing completion requests
  int send_buffer_bytes = 0;       // SO_SNDBUF of client connections; 0: the kernel's autotuning (tests make it small)
  // Origins browsers may call the API from (CORS): an answer to a request whose Origin is listed (or any, with
  // "*") carries Access-Control-Allow-Origin, and preflights (OPTIONS) are answered. Empty: no CORS headers.
  std::vector<std::string> cors_origins;
  bool access_log = true;  // a log line per answered request (method, target, status, bytes, seconds)
};

// What the HTTP layer needs to know about the model and the engine.
struct ServedModel {
  Tokenizer tokenizer;
  PromptRules rules;
  RequestDefaults defaults;
  int64_t slots = 0;
  std::string device;  // for /metrics
  // The model's LoRA adapters by name (model/lora_runtime.h; index = the adapter's id): a request whose "model" is
  // one of them runs with it, one naming the served model runs the base. /v1/models lists them too.
  std::vector<std::string> lora_adapters = {};
  // The adapter a request's "model" selects: kNoLoraAdapter for the served model's own name (or none given); nullopt
  // when it is neither.
  std::optional<int> adapter_for(std::string_view requested, std::string_view model_name) const;
};

class HttpServer {
 public:
  // Binds the port at once: Error (naming host:port and why) when it cannot. Raises the open-file limit to what
  // max_connections needs when the hard limit allows; else serves fewer connections and says so.
  HttpServer(Scheduler& scheduler, ServeMetrics& metrics, ServedModel model, HttpOptions options);
  ~HttpServer();  // stop() if still running
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int bound_port() const;
  // Starts the threads; returns at once.
  void start();
  // Shutting down: new completion requests get 503 (health says so too), idle connections close, every answer
  // from now on closes its connection.
  void set_draining();
  // Waits until every completion answer is written or `deadline` passes, then closes every connection and stops
  // the threads (a client that reads slowly cannot hold up the exit beyond the deadline).
  void stop(std::chrono::steady_clock::time_point deadline);
  // Completion requests not answered to the end yet.
  int64_t active_requests() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nvfp4lm::serve
