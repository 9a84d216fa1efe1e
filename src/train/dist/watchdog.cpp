// See watchdog.h.
#include "train/dist/watchdog.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "train/dist/mpi_communicator.h"

namespace nvfp4lm {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

double rank_timeout_seconds() {
  const char* text = std::getenv("NVFP4LM_RANK_TIMEOUT");
  if (text == nullptr || *text == '\0') return kDefaultRankTimeoutSeconds;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  NVFP4LM_CHECK(end != text && *end == '\0' && std::isfinite(value) && value > 0,
                "NVFP4LM_RANK_TIMEOUT=\"{}\": expected a number of seconds above 0", text);
  return value;
}

class WatchedCommunicator::Waiting {
 public:
  Waiting(WatchedCommunicator& owner, const char* name) : owner_(owner) {
    owner_.collective_.store(name);
    owner_.since_ns_.store(now_ns());
  }
  ~Waiting() { owner_.since_ns_.store(0); }

 private:
  WatchedCommunicator& owner_;
};

WatchedCommunicator::WatchedCommunicator(std::unique_ptr<Communicator> inner, double timeout_seconds,
                                         std::function<void(const std::string&)> on_timeout)
    : inner_(std::move(inner)), timeout_seconds_(timeout_seconds), on_timeout_(std::move(on_timeout)) {
  NVFP4LM_ASSERT(inner_ != nullptr && timeout_seconds_ > 0, "a watched communicator needs one and a timeout");
  if (!on_timeout_) {
    on_timeout_ = [](const std::string& message) {
      std::fprintf(stderr, "nvfp4lm: error: %s\n", message.c_str());
      std::fflush(stderr);
      abort_mpi_job(1);
      std::_Exit(1);
    };
  }
  watcher_ = std::thread([this] { watch(); });
}

WatchedCommunicator::~WatchedCommunicator() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  stop_changed_.notify_all();
  watcher_.join();
}

void WatchedCommunicator::watch() {
  // Checked a few times within the timeout, at most once a second.
  const auto period = std::chrono::duration<double>(std::min(1.0, timeout_seconds_ / 4));
  std::unique_lock lock(mutex_);
  while (!stop_changed_.wait_for(lock, period, [&] { return stop_; })) {
    const int64_t since = since_ns_.load();
    if (since == 0) continue;
    const double waited = static_cast<double>(now_ns() - since) * 1e-9;
    if (waited <= timeout_seconds_) continue;
    on_timeout_(fmt::format(
        "rank {} of {} waited {:.0f} s in {} for the other ranks (NVFP4LM_RANK_TIMEOUT {:g} s): a rank died or hangs; "
        "ending the job. Resume from the newest checkpoint with `train --resume --output RUN_DIR`",
        rank(), size(), waited, collective_.load(), timeout_seconds_));
    since_ns_.store(0);  // reported once (a test's on_timeout returns)
  }
}

std::string WatchedCommunicator::describe() const {
  return fmt::format("{} (a rank waits at most {:g} s for the others)", inner_->describe(), timeout_seconds_);
}

void WatchedCommunicator::all_gather(std::span<const std::byte> send, std::span<std::byte> recv) {
  const Waiting waiting(*this, "an all-gather");
  inner_->all_gather(send, recv);
}

void WatchedCommunicator::all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) {
  const Waiting waiting(*this, "an all-to-all");
  inner_->all_to_all(send, recv);
}

void WatchedCommunicator::broadcast(std::span<std::byte> data, int root) {
  const Waiting waiting(*this, "a broadcast");
  inner_->broadcast(data, root);
}

void WatchedCommunicator::gather(std::span<const std::byte> send, std::span<std::byte> recv, int root) {
  const Waiting waiting(*this, "a gather");
  inner_->gather(send, recv, root);
}

}  // namespace nvfp4lm
