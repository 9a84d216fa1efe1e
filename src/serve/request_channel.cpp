// See request_channel.h.
#include "serve/request_channel.h"

namespace nvfp4lm::serve {

void RequestChannel::push(const SequenceEvent& event) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
    events_.push_back(event);
    generated_ = event.generated_tokens;
    if (event.finished) closed_ = true;
  }
  changed_.notify_all();
}

void RequestChannel::fail(const ApiError& error) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
    error_ = error;
    closed_ = true;
  }
  changed_.notify_all();
}

bool RequestChannel::wait(std::vector<SequenceEvent>& events, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return !events_.empty() || closed_; });
  while (!events_.empty()) {
    events.push_back(std::move(events_.front()));
    events_.pop_front();
  }
  return closed_;
}

std::optional<ApiError> RequestChannel::error() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

}  // namespace nvfp4lm::serve
