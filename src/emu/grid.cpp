// See grid.h.
#include "emu/grid.h"

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "emu/block_runner.h"
#include "emu/global_race_check.h"
#include "emu/settings.h"

namespace nvfp4lm::emu {
namespace {

struct Attributes {
  std::mutex mutex;
  std::map<const void*, size_t> max_dynamic_shared;
};

Attributes& attributes() {
  static auto* instance = new Attributes();
  return *instance;
}

size_t max_dynamic_shared(const void* function) {
  Attributes& a = attributes();
  std::lock_guard lock(a.mutex);
  auto it = a.max_dynamic_shared.find(function);
  return it == a.max_dynamic_shared.end() ? kSharedPerBlockDefault : it->second;
}

// Helper OS threads for grids with several workers: each runs a share of the blocks on its own BlockRunner.
class WorkerPool {
 public:
  static WorkerPool& instance() {
    static auto* pool = new WorkerPool();  // never destroyed: its threads live as long as the process
    return *pool;
  }

  // Calls job() on `helpers` pool threads and on the calling thread, and returns when all calls have returned.
  void run(int helpers, const std::function<void()>& job) {
    std::lock_guard one_grid_at_a_time(serial_);
    std::unique_lock lock(mutex_);
    while (static_cast<int>(threads_.size()) < helpers) threads_.emplace_back([this] { loop(); });
    job_ = &job;
    unclaimed_ = helpers;
    pending_ = helpers;
    ++generation_;
    wake_.notify_all();
    lock.unlock();
    job();
    lock.lock();
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  void loop() {
    uint64_t seen = 0;
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen && unclaimed_ > 0; });
      seen = generation_;
      --unclaimed_;
      const std::function<void()>* job = job_;
      lock.unlock();
      (*job)();
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::mutex serial_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void()>* job_ = nullptr;
  int unclaimed_ = 0;  // helpers still to start the current job
  int pending_ = 0;    // helpers that have not finished it
  uint64_t generation_ = 0;
};

}  // namespace

cudaError_t check_launch(const LaunchRequest& r, std::string& why) {
  const uint64_t threads = uint64_t{r.block.x} * r.block.y * r.block.z;
  if (r.block.x == 0 || r.block.y == 0 || r.block.z == 0 || r.grid.x == 0 || r.grid.y == 0 || r.grid.z == 0) {
    why = fmt::format("kernel {}: empty launch configuration (grid ({}, {}, {}), block ({}, {}, {}))", r.name, r.grid.x,
                      r.grid.y, r.grid.z, r.block.x, r.block.y, r.block.z);
    return cudaErrorInvalidConfiguration;
  }
  if (threads > 1024 || r.block.x > 1024 || r.block.y > 1024 || r.block.z > 64) {
    why = fmt::format("kernel {}: block ({}, {}, {}) exceeds 1024 threads (x, y <= 1024, z <= 64)", r.name, r.block.x,
                      r.block.y, r.block.z);
    return cudaErrorInvalidConfiguration;
  }
  if (r.grid.x > 2147483647u || r.grid.y > 65535 || r.grid.z > 65535) {
    why = fmt::format("kernel {}: grid ({}, {}, {}) exceeds (2^31 - 1, 65535, 65535)", r.name, r.grid.x, r.grid.y,
                      r.grid.z);
    return cudaErrorInvalidConfiguration;
  }
  const size_t limit = max_dynamic_shared(r.function);
  if (r.shared_bytes > limit) {
    why = fmt::format(
        "kernel {}: {} bytes of dynamic shared memory exceed its limit of {} (above 48 KiB a kernel needs "
        "cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize))",
        r.name, r.shared_bytes, limit);
    return cudaErrorInvalidValue;
  }
  if (r.closure == nullptr || r.invoke == nullptr) {
    why = fmt::format("kernel {}: no kernel body", r.name);
    return cudaErrorInvalidDeviceFunction;
  }
  return cudaSuccess;
}

cudaError_t set_max_dynamic_shared(const void* function, int bytes, std::string& why) {
  if (bytes < 0 || static_cast<size_t>(bytes) > shared_per_block_optin()) {
    why = fmt::format("cudaFuncAttributeMaxDynamicSharedMemorySize {} outside [0, {}] ({}: at most {} bytes a block)",
                      bytes, shared_per_block_optin(), arch_name(settings().arch), shared_per_block_optin());
    return cudaErrorInvalidValue;
  }
  Attributes& a = attributes();
  std::lock_guard lock(a.mutex);
  a.max_dynamic_shared[function] = static_cast<size_t>(bytes);
  return cudaSuccess;
}

bool run_grid(const LaunchRequest& request, std::string& fault) {
  const Settings& s = settings();
  BlockPlan plan;
  plan.kernel_name = request.name;
  plan.grid_dim = request.grid;
  plan.block_dim = request.block;
  plan.dynamic_shared_bytes = request.shared_bytes;
  plan.invoke = request.invoke;
  plan.closure = request.closure.get();
  plan.schedule = s.schedule;
  const uint64_t blocks = uint64_t{request.grid.x} * request.grid.y * request.grid.z;
  const bool reverse = s.schedule == Schedule::Reverse;
  global_race_check_begin_launch();

  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex fault_mutex;
  const std::function<void()> job = [&] {
    BlockRunner& runner = BlockRunner::of_this_thread();
    std::string message;
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      const uint64_t taken = next.fetch_add(1, std::memory_order_relaxed);
      if (taken >= blocks) return;
      const uint64_t index = reverse ? blocks - 1 - taken : taken;
      const uint3 block_idx{static_cast<unsigned>(index % request.grid.x),
                            static_cast<unsigned>(index / request.grid.x % request.grid.y),
                            static_cast<unsigned>(index / (uint64_t{request.grid.x} * request.grid.y))};
      if (!runner.run(plan, block_idx, message)) {
        std::lock_guard lock(fault_mutex);
        if (!failed.exchange(true)) fault = message;
        return;
      }
    }
  };
  const int helpers = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(s.workers), blocks)) - 1;
  if (helpers <= 0) {
    job();
  } else {
    WorkerPool::instance().run(helpers, job);
  }
  return !failed.load();
}

}  // namespace nvfp4lm::emu
