// Prometheus metrics of the server (GET /metrics, text exposition format 0.0.4), all prefixed nvfp4lm_:
//   requests_total{endpoint,status}     answered requests by HTTP status (cancelled ones: status "cancelled")
//   prompt_tokens_total, generation_tokens_total   (of finished and cancelled sequences)
//   requests_waiting, requests_running, kv_slots, kv_slots_used, context_tokens     (gauges, read at scrape time)
//   batch_size                          histogram: sequences per decode step
//   decode_step_seconds                 histogram: one batched decode step (all running sequences, one token each)
//   time_to_first_token_seconds, request_seconds, queue_seconds    histograms per request
//   inter_token_latency_seconds         histogram: time between two tokens of one sequence
//   prefix_cache_hits_total, prefix_cache_reused_tokens_total      requests that reused a cached prompt prefix, and
//                                       the prompt tokens they did not compute
//   kv_cache_tokens, kv_cache_usage_ratio    tokens in the KV cache of running sequences, and of slots x context
//                                       (gauges, set by the scheduler at each iteration)
//   memory_bytes{device}, process_resident_memory_bytes            tracked tensor bytes and RSS
//   http_connections                    open client connections (gauge)
//   http_connections_closed_total{reason}   connections the server closed for a limit: idle_timeout,
//                                       header_timeout, body_timeout, write_timeout, connection_limit
// Counters and histograms are updated by the HTTP and scheduler threads; each has its own lock or is atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nvfp4lm::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends the _bucket / _sum / _count lines (with HELP and TYPE).
  void render(std::string& out, std::string_view name, std::string_view help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bound, then +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Values read at scrape time.
struct MetricGauges {
  int64_t waiting = 0, running = 0, slots = 0, context = 0;
  int64_t connections = 0;  // open client connections
  std::string device;       // "cpu", "cuda:0"
  uint64_t device_bytes = 0, rss_bytes = 0;
};

class ServeMetrics {
 public:
  ServeMetrics();

  // `status`: the HTTP status, or "cancelled" for a client that went away.
  void count_request(std::string_view endpoint, std::string_view status);
  void count_tokens(int64_t prompt, int64_t generated);
  // A connection the server closed because it passed a limit (`reason`: "idle_timeout", "connection_limit", ...).
  void count_connection_closed(std::string_view reason);
  // A request started with `reused` prompt tokens from the prefix cache (0: a miss).
  void count_prefix_cache(int64_t reused);
  void set_kv_cache_tokens(int64_t used, int64_t capacity);

  Histogram batch_size;
  Histogram decode_step_seconds;
  Histogram time_to_first_token_seconds;
  Histogram request_seconds;
  Histogram queue_seconds;
  Histogram inter_token_seconds;

  std::string render(const MetricGauges& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, uint64_t> requests_;
  std::map<std::string, uint64_t, std::less<>> connections_closed_;
  std::atomic<uint64_t> prompt_tokens_{0}, generation_tokens_{0};
  std::atomic<uint64_t> prefix_cache_hits_{0}, prefix_cache_reused_tokens_{0};
  std::atomic<int64_t> kv_cache_tokens_{0}, kv_cache_capacity_{0};
};

}  // namespace nvfp4lm::serve
