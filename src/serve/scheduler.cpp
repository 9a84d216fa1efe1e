// See scheduler.h.
#include "serve/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/logging.h"
#include "infer/constrain/grammar.h"

namespace nvfp4lm::serve {
namespace {

double seconds_between(Scheduler::Clock::time_point from, Scheduler::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

ApiError shutting_down() {
  return ApiError(503, "service_unavailable", "the server is shutting down; retry against another instance", {},
                  "server_shutting_down");
}

}  // namespace

Scheduler::Scheduler(BatchEngine& engine, ServeMetrics& metrics, SchedulerOptions options)
    : engine_(engine), metrics_(metrics), options_(options) {
  NVFP4LM_CHECK(options_.max_queue >= 0, "--max-queue must be >= 0, got {}", options_.max_queue);
  NVFP4LM_CHECK(options_.prefill_chunk >= 0, "--prefill-chunk must be >= 0, got {}", options_.prefill_chunk);
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<RequestChannel> Scheduler::submit(SequenceSpec spec) {
  auto channel = std::make_shared<RequestChannel>(std::move(spec));
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (draining_ || stopping_) throw shutting_down();
    // A request may wait when a slot is free for it or the queue has room. Withdrawn requests (cancelled, still
    // waiting or running until the loop next runs) hold neither.
    std::erase_if(waiting_, [](const auto& waiting) { return waiting->cancelled(); });
    const auto withdrawn = std::count_if(running_channels_.begin(), running_channels_.end(),
                                         [](const auto& running) { return running->cancelled(); });
    const int64_t free_slots = std::max<int64_t>(0, engine_.slots() - running_count_ + withdrawn);
    if (static_cast<int64_t>(waiting_.size()) >= options_.max_queue + free_slots)
      throw ApiError(429, "rate_limit_error",
                     fmt::format("the server is busy: {} requests are already waiting for one of {} slots (--max-queue "
                                 "{}); retry later",
                                 waiting_.size(), engine_.slots(), options_.max_queue),
                     {}, "server_busy");
    if (const auto& grammar = channel->spec().grammar) {
      uint64_t waiting_bytes = 0;
      for (const auto& waiting : waiting_)
        if (waiting->spec().grammar) waiting_bytes += waiting->spec().grammar->memory_bytes();
      const uint64_t bytes = grammar->memory_bytes();
      if (waiting_bytes + bytes > options_.max_waiting_grammar_bytes)
        throw ApiError(
            429, "rate_limit_error",
            fmt::format("the server is busy: the waiting requests' grammars (response_format, forced tool "
                        "calls) hold {:.1f} MiB and this one {:.1f} MiB, past the {:.0f} MiB they may; "
                        "retry later",
                        static_cast<double>(waiting_bytes) / (1 << 20), static_cast<double>(bytes) / (1 << 20),
                        static_cast<double>(options_.max_waiting_grammar_bytes) / (1 << 20)),
            {}, "server_busy");
    }
    waiting_.push_back(channel);
  }
  wake_.notify_all();
  return channel;
}

void Scheduler::notify() { wake_.notify_all(); }

void Scheduler::drain(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  draining_ = true;
  deadline_ = deadline;
  wake_.notify_all();
  idle_.wait(lock, [&] { return running_count_ == 0 && waiting_.empty(); });
}

int64_t Scheduler::waiting() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(waiting_.size());
}

int64_t Scheduler::running() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return running_count_;
}

void Scheduler::loop() {
  try {
    while (iterate()) {
    }
  } catch (const std::exception& e) {  // a bug: say so, and fail what runs rather than hang its clients
    log::error("serve: the scheduler stopped: {}", e.what());
    fail_running(ApiError(500, "server_error", fmt::format("the scheduler stopped: {}", e.what())));
  }
}

void Scheduler::deliver(const SequenceEvent& event) {
  const auto it = running_.find(event.sequence);
  if (it == running_.end()) return;
  RequestChannel& channel = *it->second;
  const Clock::time_point now = Clock::now();
  if (event.generated_tokens == 1)
    metrics_.time_to_first_token_seconds.observe(seconds_between(channel.submitted(), now));
  else if (const auto last = last_token_.find(event.sequence); last != last_token_.end())
    metrics_.inter_token_seconds.observe(seconds_between(last->second, now));
  last_token_[event.sequence] = now;
  channel.push(event);
  if (event.finished) {
    metrics_.request_seconds.observe(seconds_between(channel.submitted(), now));
    metrics_.count_tokens(event.prompt_tokens, event.generated_tokens);
    last_token_.erase(event.sequence);
    running_.erase(it);
  }
}

void Scheduler::fail_running(const ApiError& error) {
  for (auto& [sequence, channel] : running_) {
    engine_.cancel(sequence);
    channel->fail(error);
  }
  running_.clear();
  last_token_.clear();
  std::deque<std::shared_ptr<RequestChannel>> waiting;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    waiting.swap(waiting_);
    running_count_ = 0;
  }
  for (auto& channel : waiting) channel->fail(error);
  idle_.notify_all();
}

void Scheduler::admit(const std::shared_ptr<RequestChannel>& channel) {
  if (channel->cancelled()) return;
  metrics_.queue_seconds.observe(seconds_between(channel->submitted(), Clock::now()));
  try {
    const int64_t sequence = engine_.begin(channel->spec());
    running_[sequence] = channel;
    metrics_.count_prefix_cache(engine_.last_reused_tokens());
  } catch (const Error& e) {
    log::error("serve: a request could not start: {}", e.what());
    channel->fail(ApiError(500, "server_error", fmt::format("the request could not start: {}", e.what())));
  }
}

void Scheduler::prefill() {
  const int64_t chunk = options_.prefill_chunk;
  int64_t budget = chunk;
  while (const int64_t sequence = engine_.next_prefill()) {
    try {
      budget -= engine_.prefill(chunk > 0 ? budget : 0, [&](const SequenceEvent& event) { deliver(event); });
    } catch (const Error& e) {  // the engine ended the sequence
      log::error("serve: a request failed in its prefill: {}", e.what());
      if (const auto it = running_.find(sequence); it != running_.end()) {
        it->second->fail(ApiError(500, "server_error", fmt::format("the prefill failed: {}", e.what())));
        running_.erase(it);
      }
    }
    if (chunk == 0 || budget <= 0) break;
  }
}

bool Scheduler::iterate() {
  std::vector<std::shared_ptr<RequestChannel>> admitted, refused;
  bool cancel_running = false, stop = false;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return stopping_ || !running_.empty() || !waiting_.empty(); });
    std::erase_if(waiting_, [](const auto& channel) { return channel->cancelled(); });
    // Draining, requests already accepted (running or waiting) still run until the deadline; then the waiting ones
    // get 503 and the running ones are cancelled.
    if (stopping_ || (draining_ && Clock::now() >= deadline_)) {
      refused.assign(waiting_.begin(), waiting_.end());
      waiting_.clear();
      cancel_running = true;
      stop = stopping_;
    } else {
      // Slots of running requests whose clients went away free below, before anything runs; they admit others next
      // time round.
      for (int64_t free = engine_.slots() - engine_.running(); free > 0 && !waiting_.empty(); --free) {
        admitted.push_back(waiting_.front());
        running_channels_.push_back(waiting_.front());  // so submit() sees it withdrawn before it runs
        waiting_.pop_front();
        ++running_count_;  // counted from here, so drain() cannot miss it
      }
    }
  }
  for (auto& channel : refused) channel->fail(shutting_down());
  if (cancel_running && !running_.empty()) {
    log::warn("serve: cancelling {} running request(s) at the shutdown deadline", running_.size());
    fail_running(shutting_down());
  }

  // Clients that went away free their slots before anything else runs.
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->second->cancelled()) {
      engine_.cancel(it->first);
      metrics_.count_tokens(static_cast<int64_t>(it->second->spec().prompt.size()), it->second->generated_tokens());
      last_token_.erase(it->first);
      it = running_.erase(it);
    } else {
      ++it;
    }
  }

  for (const auto& channel : admitted) admit(channel);
  prefill();

  if (engine_.decoding() > 0) {
    const Clock::time_point start = Clock::now();
    const int64_t batch = engine_.decoding();
    try {
      engine_.step([&](const SequenceEvent& event) { deliver(event); });
      metrics_.decode_step_seconds.observe(seconds_between(start, Clock::now()));
      metrics_.batch_size.observe(static_cast<double>(batch));
    } catch (const Error& e) {
      log::error("serve: a decode step failed: {}", e.what());
      fail_running(ApiError(500, "server_error", fmt::format("the decode step failed: {}", e.what())));
    }
  }
  metrics_.set_kv_cache_tokens(engine_.cached_tokens(), engine_.slots() * engine_.context());

  {
    const std::lock_guard<std::mutex> lock(mutex_);
    running_count_ = engine_.running();
    running_channels_.clear();
    for (const auto& [id, channel] : running_) running_channels_.push_back(channel);
    if (running_count_ == 0 && waiting_.empty()) idle_.notify_all();
  }
  return !(stop && running_.empty());
}

}  // namespace nvfp4lm::serve
