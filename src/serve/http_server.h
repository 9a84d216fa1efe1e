// The HTTP face of `nvfp4lm serve` (cpp-httplib, Debian's libcpp-httplib; docs/DESIGN.md says why):
//   POST /v1/chat/completions, POST /v1/completions   OpenAI API (openai_request.h / openai_response.h)
//   GET  /v1/models, /v1/models/{id}                  the one served model
//   GET  /health                                      200 {"status": "ok"}, 503 while shutting down
//   GET  /metrics                                     Prometheus text (metrics.h)
// With an API key, /v1/* needs "Authorization: Bearer KEY" (else 401). Every error is an OpenAI error object
// (api_error.h): 400 bad JSON or fields, 401, 404 unknown route or model, 413 a body over max_body_bytes, 429 queue
// full, 500, 503 shutting down.
//
// Each connection is served by one thread of a pool (blocking I/O); a completion request waits on its
// RequestChannel in 50 ms slices and checks its client in between, so a client that disconnects — streaming or
// not — cancels its sequence within a token or 50 ms. Answers are written with chunked transfer encoding as they
// come (server-sent events when stream = true; the whole JSON object at the end otherwise). The status line of a
// non-streamed answer is therefore sent before the answer exists: should the model fail after its prefill (a NaN
// logit, a CUDA error), the connection is closed without the last chunk, which every HTTP client reports as an
// error (the failure is also logged and counted as 500).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

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
  int64_t threads = 32;  // connections served at once
};

// What the HTTP layer needs to know about the model and the engine.
struct ServedModel {
  Tokenizer tokenizer;
  PromptRules rules;
  RequestDefaults defaults;
  int64_t slots = 0;
  std::string device;  // for /metrics
};

class HttpServer {
 public:
  // Binds the port at once: Error (naming host:port and why) when it cannot.
  HttpServer(Scheduler& scheduler, ServeMetrics& metrics, ServedModel model, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int bound_port() const;
  // Serves until stop(); blocking.
  void listen();
  // Ends listen() (from another thread, once listen() was called).
  void stop();
  // New completion requests get 503 from now on (health says so too).
  void set_draining();
  // Completion requests whose answer is still being written.
  int64_t active_requests() const { return active_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<int64_t> active_{0};
};

}  // namespace nvfp4lm::serve
