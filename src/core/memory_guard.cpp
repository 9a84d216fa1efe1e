// See memory_guard.h.
#include "core/memory_guard.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#if NVFP4LM_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

namespace nvfp4lm {
namespace {

using Clock = std::chrono::steady_clock;

struct Reading {
  std::string what;
  size_t bytes = 0;
};

std::atomic<bool> g_tripped{false};
std::mutex g_mutex;  // guards g_message and g_active
std::string g_message;
std::shared_ptr<MemoryGuard::State> g_active;

}  // namespace

struct MemoryGuard::State {
  Device device;
  MemoryGuardOptions options;
  size_t limit_bytes = 0;
  bool host_memory = false;  // an integrated GPU: the process's resident memory is read too
  std::mutex mutex;          // over_since, stop
  std::optional<Clock::time_point> over_since;
  bool stop = false;
  std::condition_variable wake;
  std::thread poller;

  std::vector<Reading> read() const {
    std::vector<Reading> readings;
#if NVFP4LM_HAS_CUDA
    readings.push_back({fmt::format("{} in use (driver)", device.label()), cuda::device_memory_in_use(device.index)});
#endif
    if (host_memory)
      readings.push_back({"the process's resident memory (the GPU's is the host's)", current_rss_bytes()});
    return readings;
  }

  // Reads the device and trips when a reading has been over the limit long enough (at once when `immediate` or
  // over_seconds is 0).
  void check(bool immediate) {
    if (g_tripped.load()) return;
    const std::vector<Reading> readings = read();
    const Reading* over = nullptr;
    for (const Reading& reading : readings)
      if (reading.bytes > limit_bytes && over == nullptr) over = &reading;
    std::lock_guard lock(mutex);
    if (over == nullptr) {
      over_since.reset();
      return;
    }
    const Clock::time_point now = Clock::now();
    if (!over_since) over_since = now;
    const double seconds = std::chrono::duration<double>(now - *over_since).count();
    if (!(immediate && options.over_seconds == 0) && seconds < options.over_seconds) return;
    trip(fmt::format(
        "memory guard: {} is {:.2f} GiB, over --gpu-limit-gb {:g} for {:.1f} s (--gpu-over-secs {:g}); the run was "
        "stopped: use less memory (a smaller batch, sequence or context; train --recompute block) or raise the limit",
        over->what, to_gib(over->bytes), options.limit_gib, seconds, options.over_seconds));
  }

  // Not logged here: the Error it raises is the one line (and the backstop prints it when nothing raised it).
  void trip(const std::string& message) {
    std::lock_guard lock(g_mutex);
    if (g_tripped.load()) return;
    g_message = message;
    g_tripped.store(true);
  }

  void poll() {
    std::unique_lock lock(mutex);
    std::optional<Clock::time_point> tripped_at;
    const auto interval = std::chrono::duration<double>(options.poll_seconds);
    while (!stop) {
      wake.wait_for(lock, interval);
      if (stop) break;
      lock.unlock();
      check(/*immediate=*/false);
      lock.lock();
      if (!g_tripped.load()) continue;
      if (!tripped_at) tripped_at = Clock::now();
      if (std::chrono::duration<double>(Clock::now() - *tripped_at).count() >= MemoryGuard::kGraceSeconds) {
        // The predecessor's guard killed the process; nvfp4lm first lets it fail as any failure does, and ends it
        // only when it did not stop (a kernel or a CPU loop that allocates nothing).
        std::fprintf(stderr, "nvfp4lm: error: %s (the process did not stop within %g s: ended with status 124)\n",
                     memory_guard_message().c_str(), MemoryGuard::kGraceSeconds);
        std::fflush(stderr);
        std::_Exit(124);
      }
    }
  }
};

void check_memory_guard_options(const MemoryGuardOptions& options) {
  NVFP4LM_CHECK(std::isfinite(options.limit_gib) && options.limit_gib >= 0,
                "--gpu-limit-gb must be a number of GiB >= 0 (0 = no guard), got {}", options.limit_gib);
  NVFP4LM_CHECK(std::isfinite(options.over_seconds) && options.over_seconds >= 0,
                "--gpu-over-secs must be >= 0 (0 = stop at once), got {}", options.over_seconds);
  NVFP4LM_CHECK(std::isfinite(options.poll_seconds) && options.poll_seconds >= 0.05 && options.poll_seconds <= 3600,
                "--gpu-poll-secs must be between 0.05 and 3600 seconds, got {}", options.poll_seconds);
}

MemoryGuard::MemoryGuard(Device device, const MemoryGuardOptions& options) : state_(std::make_shared<State>()) {
  check_memory_guard_options(options);
  NVFP4LM_CHECK(options.limit_gib > 0, "a memory guard needs --gpu-limit-gb > 0");
  NVFP4LM_CHECK(device.is_cuda(),
                "--gpu-limit-gb guards a GPU's memory, and --device {} has none; --max-memory GiB limits what "
                "nvfp4lm holds on the CPU",
                device.label());
#if !NVFP4LM_HAS_CUDA
  NVFP4LM_FAIL("--gpu-limit-gb: this nvfp4lm was built without CUDA");
#endif
  state_->device = device;
  state_->options = options;
  state_->limit_bytes = static_cast<size_t>(options.limit_gib * 1024.0 * 1024.0 * 1024.0);
  state_->host_memory = device_memory_is_host_memory(device);
  {
    std::lock_guard lock(g_mutex);
    NVFP4LM_CHECK(g_active == nullptr, "a memory guard is active already (one per process)");
    g_active = state_;
    g_tripped.store(false);
    g_message.clear();
  }
  state_->check(/*immediate=*/true);  // over already (another process, a limit below the context): say so now
  state_->poller = std::thread([state = state_] { state->poll(); });
}

MemoryGuard::~MemoryGuard() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  if (state_->poller.joinable()) state_->poller.join();
  std::lock_guard lock(g_mutex);
  g_active.reset();
  g_tripped.store(false);
  g_message.clear();
}

std::string MemoryGuard::description() const {
  const MemoryGuardOptions& o = state_->options;
  return fmt::format(
      "memory guard: {} in use as the driver reports it{}, limit --gpu-limit-gb {:g} GiB, over for {:g} s, polled "
      "every {:g} s and after every new device allocation",
      state_->device.label(), state_->host_memory ? " and the process's resident memory (unified memory)" : "",
      o.limit_gib, o.over_seconds, o.poll_seconds);
}

bool memory_guard_tripped() { return g_tripped.load(std::memory_order_relaxed); }

std::string memory_guard_message() {
  std::lock_guard lock(g_mutex);
  return g_message;
}

void check_memory_guard() {
  if (memory_guard_tripped()) throw Error(memory_guard_message());
}

void memory_guard_after_device_allocation(int index) {
  std::shared_ptr<MemoryGuard::State> state;
  {
    std::lock_guard lock(g_mutex);
    state = g_active;
  }
  if (state == nullptr || state->device.index != index || g_tripped.load()) return;
  state->check(/*immediate=*/true);
}

}  // namespace nvfp4lm
