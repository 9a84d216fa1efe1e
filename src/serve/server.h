// `nvfp4lm serve` as a library: a model behind the OpenAI API with continuous batching.
//   Server = BatchEngine (the model and its pool of KV-cache slots, infer/batch_engine.h)
//          + Scheduler (the thread that owns the engine, scheduler.h)
//          + HttpServer (the connections, http_server.h) + ServeMetrics.
// The pool has min(--max-batch, what --max-memory leaves after the weights) slots of --context tokens each, all
// allocated at start, so serving never allocates KV memory per request and memory goes back to the idle level
// between bursts. run() serves until shutdown(): then new requests get a 503, the accepted ones (running, or waiting
// for a slot) run until the shutdown timeout, and what is left then gets a 503 (or, on a stream that began, an
// error event); answers still being written
// get a few seconds more (a client that reads slowly cannot hold up the exit longer), and run() returns.
// serve_until_signal() wires SIGTERM / SIGINT to that, for the CLI; a second signal exits at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "infer/batch_engine.h"
#include "infer/sampler.h"
#include "model/qwen3_decode_step.h"
#include "model/qwen3_model.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::serve {

struct ServeOptions {
  HttpOptions http;                     // host, port, api key, model name (default: the model directory's name)
  int64_t max_batch = 8;                // sequences decoded together at most (KV-cache slots)
  int64_t context = 0;                  // tokens per sequence; 0: the model's max_position_embeddings, at most 4096
  int64_t max_queue = 64;               // requests waiting for a slot before 429
  int64_t prefill_chunk = 256;          // prompt tokens per prefill chunk between decode steps; 0: whole prompts
  bool prefix_cache = true;             // a new prompt reuses the K/V a free slot holds of its prefix
  bool reuse_answers = false;           // with prefix_cache: also of the answers (BatchEngineOptions::reuse_answers)
  double shutdown_timeout_s = 30;       // how long running requests may go on after SIGTERM
  std::optional<DecodeMode> decode;     // CUDA: Graph (one graph per batch bucket) unless --cuda-graph off
  SamplingOptions sampling;             // defaults for requests that leave sampling fields out
  std::string chat_template = "auto";   // --chat-template (tokenizer/chat_template.h), as generate renders prompts
  std::optional<bool> enable_thinking;  // --no-think: false; requests' chat_template_kwargs override it
};

class Server {
 public:
  // Builds the engine (allocating the pool) and binds the port; Error when either cannot be done.
  Server(const Qwen3Model& model, Tokenizer tokenizer, ServeOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return http_->bound_port(); }
  const BatchEngine& engine() const { return *engine_; }
  const ServeOptions& options() const { return options_; }
  // Serves until shutdown(), then drains (see the top of this file) and returns.
  void run();
  // From any thread (a signal thread, a test); idempotent.
  void shutdown();

 private:
  ServeOptions options_;
  ServeMetrics metrics_;
  std::unique_ptr<BatchEngine> engine_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<HttpServer> http_;
  std::mutex mutex_;
  std::condition_variable shutdown_requested_;
  bool shutdown_ = false;
};

// Builds the server, prints "serve: listening on http://HOST:PORT ...", runs it until SIGTERM or SIGINT arrives,
// drains and returns (the process then exits 0).
void serve_until_signal(const Qwen3Model& model, const Tokenizer& tokenizer, const ServeOptions& options);

}  // namespace nvfp4lm::serve
