// See request_channel.h.
#include "serve/request_channel.h"

namespace nvfp4lm::serve {

void RequestChannel::notify(std::unique_lock<std::mutex>& lock) {
  const std::shared_ptr<const Listener> listener = listener_;
  lock.unlock();
  if (listener) (*listener)();
}

void RequestChannel::push(const SequenceEvent& event) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_) return;
  events_.push_back(event);
  generated_ = event.generated_tokens;
  if (event.finished) closed_ = true;
  notify(lock);
}

void RequestChannel::fail(const ApiError& error) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_) return;
  error_ = error;
  closed_ = true;
  notify(lock);
}

void RequestChannel::set_listener(Listener listener) {
  std::unique_lock<std::mutex> lock(mutex_);
  listener_ = std::make_shared<const Listener>(std::move(listener));
  if (!events_.empty() || closed_) notify(lock);
}

bool RequestChannel::take(std::vector<SequenceEvent>& events) {
  const std::lock_guard<std::mutex> lock(mutex_);
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
