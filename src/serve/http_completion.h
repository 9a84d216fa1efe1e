// POST /v1/chat/completions and POST /v1/completions over an HttpConnection (http_connection.h). The body is parsed,
// checked and tokenized on a preparation thread and submitted to the scheduler at once, so a full queue (429) or a
// shutdown (503) is answered then. The scheduler's events are written as they arrive: the request's channel
// (request_channel.h) posts a wake-up to the connection's strand for every event, and the strand takes them.
//  - stream = false: the whole object with Content-Length once the sequence finished, or the error's status and
//    object when it failed (before or after its prefill: nothing goes out before the answer is known);
//  - stream = true: the head (200, text/event-stream) goes out with the first event, so a request refused or
//    failed before its first token gets its own status too; then the events as they come; an error after the
//    stream began is an error event and [DONE] (openai_response.h).
// A client that goes away cancels the channel: the scheduler drops the request at the next token boundary.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "serve/api_error.h"
#include "serve/http_connection.h"
#include "serve/http_server.h"

namespace boost::asio {
class thread_pool;
}

namespace nvfp4lm::serve {

// An ApiError as an HTTP answer: its status and object, with Retry-After on 429 and 503.
HttpReply api_error_reply(const ApiError& error);

class CompletionService {
 public:
  // `model` and `model_name` must outlive the service.
  CompletionService(Scheduler& scheduler, ServeMetrics& metrics, const ServedModel& model,
                    const std::string& model_name, int prepare_threads);
  ~CompletionService();
  CompletionService(const CompletionService&) = delete;
  CompletionService& operator=(const CompletionService&) = delete;

  // On the connection's strand, for its current request.
  void answer(const std::shared_ptr<HttpConnection>& connection, Endpoint endpoint, std::string body);
  // Runs `work` (parsing and tokenizing a body: /tokenize, /detokenize) on a preparation thread, not the
  // connection's, and answers 200 with the JSON it returns, or the ApiError it throws (500 for anything else).
  // `label` is the endpoint in /metrics.
  void answer_json(const std::shared_ptr<HttpConnection>& connection, std::string label,
                   std::function<nlohmann::json()> work);
  // New requests get 503 from now on.
  void set_draining() { draining_ = true; }
  // Waits for the preparation threads' work (requests prepared from now on get 503).
  void stop();
  // Requests whose answer is not complete yet.
  int64_t active() const { return active_; }

 private:
  friend class CompletionAnswer;
  std::string response_id(Endpoint endpoint);
  uint64_t random_u64();

  Scheduler& scheduler_;
  ServeMetrics& metrics_;
  const ServedModel& model_;
  const std::string& model_name_;
  std::unique_ptr<boost::asio::thread_pool> prepare_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> active_{0};
  std::mutex random_mutex_;
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace nvfp4lm::serve
