// A bound on how long a rank waits for the others (issue 32: a rank that dies must not leave the rest hanging). The
// launcher usually ends a job whose rank died at once (mpirun does; srun with --kill-on-bad-exit=1); where it does
// not — a rank that hangs, a launcher that waits — WatchedCommunicator ends it: a collective that has waited longer
// than the timeout for the other ranks reports which one, where and for how long, and the job is aborted
// (abort_mpi_job: every rank stops) with exit code 1.
//
// The timeout must exceed the longest legitimate wait: the other ranks wait in the next step's first collective
// while rank 0 writes a checkpoint (a few seconds a GB) — default 600 s, NVFP4LM_RANK_TIMEOUT=SECONDS to change it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "train/dist/communicator.h"

namespace nvfp4lm {

inline constexpr double kDefaultRankTimeoutSeconds = 600;

// NVFP4LM_RANK_TIMEOUT (seconds, > 0) or the default; Error naming the variable for a value that is not a number.
double rank_timeout_seconds();

class WatchedCommunicator final : public Communicator {
 public:
  // `on_timeout` receives the message; by default it is printed, the MPI job aborted and the process ended.
  WatchedCommunicator(std::unique_ptr<Communicator> inner, double timeout_seconds,
                      std::function<void(const std::string&)> on_timeout = {});
  ~WatchedCommunicator() override;

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string describe() const override;
  void all_gather(std::span<const std::byte> send, std::span<std::byte> recv) override;
  void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void gather(std::span<const std::byte> send, std::span<std::byte> recv, int root) override;

 private:
  // Marks the collective `name` as waiting for as long as the object lives.
  class Waiting;
  void watch();

  std::unique_ptr<Communicator> inner_;
  const double timeout_seconds_;
  std::function<void(const std::string&)> on_timeout_;
  std::atomic<int64_t> since_ns_{0};         // steady clock when the current collective began; 0: none
  std::atomic<const char*> collective_{""};  // its name
  std::mutex mutex_;
  std::condition_variable stop_changed_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace nvfp4lm
