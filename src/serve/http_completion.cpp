// See http_completion.h.
#include "serve/http_completion.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <ctime>
#include <optional>
#include <vector>

#include "core/json_text.h"
#include "core/logging.h"
#include "core/text_excerpt.h"
#include "serve/openai_response.h"

namespace nvfp4lm::serve {
namespace {

// Seconds a client should wait before it retries: the queue moves within a few tokens; a server that shuts down
// (or has no connection to spare) needs longer, or another instance.
constexpr int kRetryAfterBusySeconds = 1;
constexpr int kRetryAfterUnavailableSeconds = 5;

ApiError shutting_down() {
  return ApiError(503, "service_unavailable", "the server is shutting down; retry against another instance", {},
                  "server_shutting_down");
}

}  // namespace

HttpReply api_error_reply(const ApiError& error) {
  HttpReply reply{error.status(), "application/json", to_json_text(error.body()), {}};
  if (error.status() == 429) reply.headers.emplace_back("Retry-After", std::to_string(kRetryAfterBusySeconds));
  if (error.status() == 503) reply.headers.emplace_back("Retry-After", std::to_string(kRetryAfterUnavailableSeconds));
  return reply;
}

// One request's answer. Lives while the connection waits for it (the connection's on_gone holds it) and while a
// wake-up is posted; the channel's listener holds it weakly.
class CompletionAnswer : public std::enable_shared_from_this<CompletionAnswer> {
 public:
  CompletionAnswer(std::shared_ptr<HttpConnection> connection, CompletionService& service, Endpoint endpoint)
      : connection_(std::move(connection)), service_(service), endpoint_(endpoint) {
    ++service_.active_;
  }
  ~CompletionAnswer() {
    if (!done_) --service_.active_;
  }

  // ---- preparation thread
  void prepare(const std::string& body);
  bool client_gone() const { return gone_; }

  // ---- connection's strand
  void refuse(const ApiError& error) {
    if (done_ || gone_) return;
    connection_->reply(api_error_reply(error));
    finish(std::to_string(error.status()));
  }
  void gone();

 private:
  void started(const CompletionRequest& request, std::vector<std::shared_ptr<RequestChannel>> channels);
  void cancel_channels();
  void wake();
  void pump();
  void finish(const std::string& status) {
    if (done_) return;
    done_ = true;
    --service_.active_;
    service_.metrics_.count_request(endpoint_path(endpoint_), status);
  }

  std::shared_ptr<HttpConnection> connection_;
  CompletionService& service_;
  Endpoint endpoint_;
  std::atomic<bool> gone_{false};  // set on the strand, read by the preparation thread to skip the work
  std::atomic<bool> wake_posted_{false};
  // Strand only.
  bool done_ = false;
  bool stream_ = false;
  bool head_sent_ = false;
  std::vector<std::shared_ptr<RequestChannel>> channels_;  // choice i's sequence
  std::vector<bool> closed_;                               // choice i's channel is closed and taken
  std::optional<CompletionResponse> response_;
};

void CompletionAnswer::prepare(const std::string& body) {
  const ServedModel& model = service_.model_;
  try {
    // Between the stages (parse, read, render and tokenize, queue): a client that left or a shutdown ends the work
    // there, so a preparation holds a shutdown or a preparation thread for one stage at most (each is bounded:
    // core/json_text.h, serve/sequence_request.h).
    auto still_wanted = [&] {
      if (service_.draining_) throw shutting_down();
      return !gone_;
    };
    if (!still_wanted()) return;
    OrderedJsonParseResult parsed = try_parse_ordered_json(body);  // the client's key order (openai_request.h)
    if (!parsed.ok()) throw invalid_request(fmt::format("the request body is not valid JSON: {}", parsed.error));
    if (!still_wanted()) return;
    CompletionRequest request = parse_completion_request(parsed.value, endpoint_, model.defaults);
    if (!still_wanted()) return;
    if (!request.ignored.empty())
      log::debug("serve: {} ignores unknown field(s) {}", endpoint_path(endpoint_), fmt::join(request.ignored, ", "));
    const std::optional<int> adapter = model.adapter_for(request.model, service_.model_name_);
    if (!adapter)
      throw ApiError(404, "invalid_request_error",
                     fmt::format("The model {} does not exist; this server serves '{}'{} (GET /v1/models)",
                                 quoted_excerpt(request.model), service_.model_name_,
                                 model.lora_adapters.empty()
                                     ? ""
                                     : fmt::format(" and its LoRA adapters {}", fmt::join(model.lora_adapters, ", "))),
                     "model", "model_not_found");
    SequenceSpec spec = to_sequence_spec(request, model.tokenizer, model.rules, service_.random_u64());
    spec.adapter = *adapter;
    if (!still_wanted()) return;
    // n choices are n sequences, choice i sampled with seed + i (choice 0 is what n = 1 gives). All are queued or
    // none: a 429 for a later one withdraws the earlier ones.
    std::vector<std::shared_ptr<RequestChannel>> channels;
    try {
      for (int i = 0; i < request.n; ++i) {
        SequenceSpec choice = spec;
        choice.options.sampling.seed = spec.options.sampling.seed + static_cast<uint64_t>(i);
        channels.push_back(service_.scheduler_.submit(std::move(choice)));
      }
    } catch (...) {
      for (const auto& channel : channels) channel->cancel();
      if (!channels.empty()) service_.scheduler_.notify();
      throw;
    }
    connection_->post([self = shared_from_this(), request = std::move(request), channels = std::move(channels)] {
      self->started(request, channels);
    });
  } catch (const ApiError& error) {
    connection_->post([self = shared_from_this(), error] { self->refuse(error); });
  } catch (const std::exception& e) {
    log::error("serve: {} failed: {}", endpoint_path(endpoint_), e.what());
    const ApiError error(500, "server_error", fmt::format("internal error: {}", e.what()));
    connection_->post([self = shared_from_this(), error] { self->refuse(error); });
  }
}

void CompletionAnswer::started(const CompletionRequest& request,
                               std::vector<std::shared_ptr<RequestChannel>> channels) {
  channels_ = std::move(channels);
  closed_.assign(channels_.size(), false);
  if (gone_ || done_) return cancel_channels();
  stream_ = request.stream;
  // The answer names the model the request asked for (an adapter's name, as vLLM does), else the served one.
  response_.emplace(request, service_.model_.tokenizer, service_.response_id(endpoint_), std::time(nullptr),
                    request.model.empty() ? service_.model_name_ : request.model,
                    answer_parsing(request, service_.model_.rules));
  for (const auto& channel : channels_)
    channel->set_listener([weak = weak_from_this()] {
      if (const auto self = weak.lock()) self->wake();
    });
}

void CompletionAnswer::cancel_channels() {
  for (const auto& channel : channels_) channel->cancel();
  if (!channels_.empty()) service_.scheduler_.notify();
}

void CompletionAnswer::wake() {
  if (wake_posted_.exchange(true)) return;  // one wake-up in flight takes every event that arrived meanwhile
  connection_->post([self = shared_from_this()] {
    self->wake_posted_ = false;
    self->pump();
  });
}

void CompletionAnswer::pump() {
  if (done_ || gone_ || !response_) return;
  std::string text;
  std::optional<ApiError> error;
  bool all_closed = true;
  for (size_t i = 0; i < channels_.size(); ++i) {
    if (closed_[i]) continue;
    std::vector<SequenceEvent> events;
    closed_[i] = channels_[i]->take(events);
    for (const SequenceEvent& event : events) text += response_->add(event, static_cast<int>(i));
    if (closed_[i] && !error) error = channels_[i]->error();
    all_closed = all_closed && closed_[i];
  }
  // One choice failing fails the answer: the other choices stop too.
  if (error) cancel_channels();
  if (!stream_ || (!head_sent_ && error)) {
    if (error) return refuse(*error);
    if (!all_closed) return;
    connection_->reply(HttpReply{200, "application/json", to_json_text(response_->body()), {}});
    return finish("200");
  }
  if (!head_sent_) {
    if (text.empty() && !all_closed) return;
    connection_->begin_stream(HttpReply{200, "text/event-stream", {}, {{"Cache-Control", "no-cache"}}});
    head_sent_ = true;
  }
  connection_->stream(text);
  if (!all_closed && !error) return;
  if (error) log::error("serve: a request failed after its answer began: {}", error->what());
  connection_->stream(error ? CompletionResponse::stream_error(*error) : response_->stream_end());
  connection_->end_stream();
  finish(error ? std::to_string(error->status()) : "200");
}

void CompletionAnswer::gone() {
  gone_ = true;
  cancel_channels();
  if (!done_) finish("cancelled");
}

CompletionService::CompletionService(Scheduler& scheduler, ServeMetrics& metrics, const ServedModel& model,
                                     const std::string& model_name, int prepare_threads)
    : scheduler_(scheduler),
      metrics_(metrics),
      model_(model),
      model_name_(model_name),
      prepare_(std::make_unique<boost::asio::thread_pool>(static_cast<size_t>(std::max(1, prepare_threads)))) {}

CompletionService::~CompletionService() { stop(); }

void CompletionService::stop() {
  draining_ = true;
  prepare_->join();
}

void CompletionService::answer(const std::shared_ptr<HttpConnection>& connection, Endpoint endpoint, std::string body) {
  auto answer = std::make_shared<CompletionAnswer>(connection, *this, endpoint);
  connection->on_gone([answer] { answer->gone(); });
  if (draining_) return answer->refuse(shutting_down());
  boost::asio::post(*prepare_, [answer, body = std::move(body)] {
    if (!answer->client_gone()) answer->prepare(body);
  });
}

void CompletionService::answer_json(const std::shared_ptr<HttpConnection>& connection, std::string label,
                                    std::function<nlohmann::json()> work) {
  boost::asio::post(*prepare_, [this, connection, label = std::move(label), work = std::move(work)] {
    HttpReply reply;
    try {
      reply = HttpReply{200, "application/json", to_json_text(work()), {}};
    } catch (const ApiError& error) {
      reply = api_error_reply(error);
    } catch (const std::exception& e) {
      log::error("serve: {} failed: {}", label, e.what());
      reply = api_error_reply(ApiError(500, "server_error", fmt::format("internal error: {}", e.what())));
    }
    metrics_.count_request(label, std::to_string(reply.status));
    connection->post([connection, reply = std::move(reply)]() mutable { connection->reply(std::move(reply)); });
  });
}

uint64_t CompletionService::random_u64() {
  const std::lock_guard<std::mutex> lock(random_mutex_);
  return random_();
}

std::string CompletionService::response_id(Endpoint endpoint) {
  return fmt::format("{}-{:016x}{:08x}", endpoint == Endpoint::ChatCompletions ? "chatcmpl" : "cmpl", random_u64(),
                     static_cast<uint32_t>(random_u64()));
}

}  // namespace nvfp4lm::serve
