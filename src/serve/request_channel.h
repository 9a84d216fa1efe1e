// RequestChannel: the way between the HTTP layer that answers one request and the scheduler thread that runs it
// (scheduler.h). The scheduler pushes the sequence's events and closes the channel when it finished or failed;
// every push and the close call the channel's listener, which the HTTP layer sets to post a wake-up to the
// connection's I/O thread (it never blocks there). The HTTP layer then takes the events, and cancels the channel
// when the client went away, which the scheduler notices at the next token boundary.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "infer/batch_engine.h"
#include "serve/api_error.h"

namespace nvfp4lm::serve {

class RequestChannel {
 public:
  using Clock = std::chrono::steady_clock;
  // Called on the scheduler's thread (or the caller of set_listener), without the channel's lock held: it must
  // only hand the news on (post a wake-up), never take() or wait itself.
  using Listener = std::function<void()>;

  explicit RequestChannel(SequenceSpec spec) : spec_(std::move(spec)), submitted_(Clock::now()) {}

  // ---- scheduler side
  const SequenceSpec& spec() const { return spec_; }
  void push(const SequenceEvent& event);  // closes the channel when the event finishes the sequence
  void fail(const ApiError& error);       // closes the channel with an error (no effect once closed)
  // ---- HTTP side
  // From now on every push and the close call `listener`; called at once when events or the close already wait.
  void set_listener(Listener listener);
  // Moves the events that arrived into `events`. Returns true once the channel is closed and everything was taken.
  bool take(std::vector<SequenceEvent>& events);
  std::optional<ApiError> error() const;
  // The client went away: the scheduler drops the request (queued or running) at the next token boundary.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  Clock::time_point submitted() const { return submitted_; }
  // Tokens the sequence has generated so far (the last event's count).
  int64_t generated_tokens() const { return generated_; }

 private:
  void notify(std::unique_lock<std::mutex>& lock);

  SequenceSpec spec_;
  Clock::time_point submitted_;
  mutable std::mutex mutex_;
  std::shared_ptr<const Listener> listener_;  // shared: called outside the lock while set_listener may replace it
  std::deque<SequenceEvent> events_;
  bool closed_ = false;
  std::optional<ApiError> error_;
  std::atomic<bool> cancelled_{false};
  std::atomic<int64_t> generated_{0};
};

}  // namespace nvfp4lm::serve
