// Scheduler: the one thread that owns the model (through a BatchEngine) and runs requests with continuous
// batching. HTTP threads submit() requests and read their events from a RequestChannel; the scheduler loop, at
// every token boundary:
//   1. drops requests whose client went away (queued, or running: their slots free at once);
//   2. admits the oldest waiting request when a slot is free: its prompt is prefilled and its first token chosen
//      (one prefill per iteration, so running sequences keep getting tokens while new ones join);
//   3. runs one batched decode step for every running sequence and hands each its token.
// Waiting requests are bounded: past max_queue requests beyond the free slots, submit() answers 429. drain() stops
// taking requests (503), lets running ones finish until a deadline and then cancels what is left (their clients get a
// 503 error).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "infer/batch_engine.h"
#include "serve/metrics.h"
#include "serve/request_channel.h"

namespace nvfp4lm::serve {

struct SchedulerOptions {
  int64_t max_queue = 64;  // requests waiting for a slot; more are answered 429
};

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;

  // The engine and metrics must outlive the scheduler; the engine is used by the scheduler's thread only.
  Scheduler(BatchEngine& engine, ServeMetrics& metrics, SchedulerOptions options);
  ~Scheduler();  // stops the thread (running requests fail with 503)
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. ApiError 429 when max_queue requests already wait, 503 while draining.
  std::shared_ptr<RequestChannel> submit(SequenceSpec spec);
  // Wakes the loop (a channel was cancelled).
  void notify();

  // Stops admitting requests (new and waiting ones get 503), lets running ones finish until `deadline`, then
  // cancels the rest; returns when nothing runs.
  void drain(Clock::time_point deadline);

  int64_t waiting() const;
  int64_t running() const;

 private:
  void loop();
  // One pass of the loop (steps 1-3 above); returns false when the loop should end.
  bool iterate();
  void fail_running(const ApiError& error);
  void deliver(const SequenceEvent& event);

  BatchEngine& engine_;
  ServeMetrics& metrics_;
  SchedulerOptions options_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;  // new work, a cancellation, drain or stop
  std::condition_variable idle_;  // nothing runs any more (drain waits on it)
  std::deque<std::shared_ptr<RequestChannel>> waiting_;
  bool draining_ = false;
  bool stopping_ = false;
  Clock::time_point deadline_{};
  int64_t running_count_ = 0;  // mirrors the engine for other threads

  // Scheduler thread only.
  std::map<int64_t, std::shared_ptr<RequestChannel>> running_;  // by sequence id
  std::map<const RequestChannel*, Clock::time_point> first_token_pending_;
  std::thread thread_;
};

}  // namespace nvfp4lm::serve
