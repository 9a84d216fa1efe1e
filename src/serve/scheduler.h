// Scheduler: the one thread that owns the model (through a BatchEngine) and runs requests with continuous
// batching. HTTP threads submit() requests and read their events from a RequestChannel; the scheduler loop, at
// every token boundary:
//   1. drops requests whose client went away (queued, or running: their slots free at once);
//   2. admits waiting requests, oldest first, while slots are free (BatchEngine::begin: a slot, with the prefix its
//      cache holds when prefix caching is on; nothing computed yet);
//   3. prefills one chunk: at most prefill_chunk prompt tokens of the prefilling sequences, oldest first (0: the
//      whole prompt of the oldest one); a sequence whose prompt is complete gets its first token;
//   4. runs one batched decode step for every decoding sequence and hands each its token.
// So running streams get a token between two chunks of a long prompt: the gap a joining prompt causes is about one
// chunk's prefill, not the whole prompt's.
// Waiting requests are bounded: past max_queue requests beyond the free slots, submit() answers 429. drain() stops
// taking new requests (503) but runs the ones already accepted — running and waiting — until a deadline; then the
// waiting ones get a 503 and the running ones are cancelled (their clients get a 503 error, or an error event on a
// stream that began).
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
  // The bytes the waiting requests' compiled grammars (response_format, forced tool calls) may hold together; a
  // request whose grammar would pass it is answered 429 (each holds up to ~60 MB: constrain/grammar.h).
  uint64_t max_waiting_grammar_bytes = uint64_t{512} << 20;
  int64_t prefill_chunk = 256;  // prompt tokens prefilled per iteration; 0: one whole prompt per iteration
};

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;

  // The engine and metrics must outlive the scheduler; the engine is used by the scheduler's thread only.
  Scheduler(BatchEngine& engine, ServeMetrics& metrics, SchedulerOptions options);
  ~Scheduler();  // stops the thread (running requests fail with 503)
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. ApiError 429 when max_queue requests already wait or the waiting grammars would pass
  // max_waiting_grammar_bytes, 503 while draining.
  std::shared_ptr<RequestChannel> submit(SequenceSpec spec);
  // Wakes the loop (a channel was cancelled).
  void notify();

  // Stops taking new requests (503), runs the accepted ones until `deadline`, then refuses the waiting ones and
  // cancels the rest; returns when nothing runs.
  void drain(Clock::time_point deadline);

  int64_t waiting() const;
  int64_t running() const;

 private:
  void loop();
  // One pass of the loop (steps 1-4 above); returns false when the loop should end.
  bool iterate();
  void admit(const std::shared_ptr<RequestChannel>& channel);
  void prefill();
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
  // The running requests as of the last step, for submit(): a withdrawn one (cancelled, its slot not yet freed by the
  // loop) does not count against the queue, so a 429's withdrawn choices never refuse the next request.
  std::vector<std::shared_ptr<RequestChannel>> running_channels_;

  // Scheduler thread only.
  std::map<int64_t, std::shared_ptr<RequestChannel>> running_;  // by sequence id
  std::map<int64_t, Clock::time_point> last_token_;             // by sequence id: when it got its last token
  std::thread thread_;
};

}  // namespace nvfp4lm::serve
