// RequestChannel: the way between the HTTP thread that answers one request and the scheduler thread that runs it
// (scheduler.h). The scheduler pushes the sequence's events and closes the channel when it finished or failed;
// the HTTP thread waits for events in short slices (so it can check its client in between) and cancels the
// channel when the client went away, which the scheduler notices at the next token boundary.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "infer/batch_engine.h"
#include "serve/api_error.h"

namespace nvfp4lm::serve {

class RequestChannel {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RequestChannel(SequenceSpec spec) : spec_(std::move(spec)), submitted_(Clock::now()) {}

  // ---- scheduler side
  const SequenceSpec& spec() const { return spec_; }
  void push(const SequenceEvent& event);  // closes the channel when the event finishes the sequence
  void fail(const ApiError& error);       // closes the channel with an error (no effect once closed)
  // ---- HTTP side
  // Waits until events arrive, the channel closes or `timeout` passes; moves the events into `events`. Returns
  // true once the channel is closed and everything was taken.
  bool wait(std::vector<SequenceEvent>& events, std::chrono::milliseconds timeout);
  std::optional<ApiError> error() const;
  // The client went away: the scheduler drops the request (queued or running) at the next token boundary.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  Clock::time_point submitted() const { return submitted_; }
  // Tokens the sequence has generated so far (the last event's count).
  int64_t generated_tokens() const { return generated_; }

 private:
  SequenceSpec spec_;
  Clock::time_point submitted_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<SequenceEvent> events_;
  bool closed_ = false;
  std::optional<ApiError> error_;
  std::atomic<bool> cancelled_{false};
  std::atomic<int64_t> generated_{0};
};

}  // namespace nvfp4lm::serve
