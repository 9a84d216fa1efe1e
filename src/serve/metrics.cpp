// See metrics.h.
#include "serve/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace nvfp4lm::serve {
namespace {

const std::vector<double> kLatencyBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};

void header(std::string& out, std::string_view name, std::string_view help, std::string_view type) {
  out += fmt::format("# HELP nvfp4lm_{} {}\n# TYPE nvfp4lm_{} {}\n", name, help, name, type);
}

template <typename T>
void gauge(std::string& out, std::string_view name, std::string_view help, T value) {
  header(out, name, help, "gauge");
  out += fmt::format("nvfp4lm_{} {}\n", name, value);
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, std::string_view name, std::string_view help) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  header(out, name, help, "histogram");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("nvfp4lm_{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("nvfp4lm_{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("nvfp4lm_{}_sum {}\nnvfp4lm_{}_count {}\n", name, sum_, name, count_);
}

ServeMetrics::ServeMetrics()
    : batch_size({1, 2, 4, 8, 16, 32, 64, 128, 256}),
      decode_step_seconds({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      time_to_first_token_seconds(kLatencyBounds),
      request_seconds(kLatencyBounds),
      queue_seconds(kLatencyBounds),
      inter_token_seconds({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}) {}

void ServeMetrics::count_request(std::string_view endpoint, std::string_view status) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{std::string(endpoint), std::string(status)}];
}

void ServeMetrics::count_connection_closed(std::string_view reason) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++connections_closed_[std::string(reason)];
}

void ServeMetrics::count_tokens(int64_t prompt, int64_t generated) {
  prompt_tokens_ += static_cast<uint64_t>(prompt);
  generation_tokens_ += static_cast<uint64_t>(generated);
}

void ServeMetrics::count_prefix_cache(int64_t reused) {
  if (reused <= 0) return;
  ++prefix_cache_hits_;
  prefix_cache_reused_tokens_ += static_cast<uint64_t>(reused);
}

void ServeMetrics::set_kv_cache_tokens(int64_t used, int64_t capacity) {
  kv_cache_tokens_ = used;
  kv_cache_capacity_ = capacity;
}

std::string ServeMetrics::render(const MetricGauges& gauges) const {
  std::string out;
  header(out, "requests_total", "Requests answered, by endpoint and HTTP status (or cancelled)", "counter");
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, count] : requests_)
      out += fmt::format("nvfp4lm_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, count);
  }
  header(out, "prompt_tokens_total", "Prompt tokens (prefilled or from the prefix cache)", "counter");
  out += fmt::format("nvfp4lm_prompt_tokens_total {}\n", prompt_tokens_.load());
  header(out, "generation_tokens_total", "Tokens generated", "counter");
  out += fmt::format("nvfp4lm_generation_tokens_total {}\n", generation_tokens_.load());
  header(out, "prefix_cache_hits_total", "Requests whose prompt began with a prefix still in a KV-cache slot",
         "counter");
  out += fmt::format("nvfp4lm_prefix_cache_hits_total {}\n", prefix_cache_hits_.load());
  header(out, "prefix_cache_reused_tokens_total", "Prompt tokens taken from the prefix cache instead of prefilled",
         "counter");
  out += fmt::format("nvfp4lm_prefix_cache_reused_tokens_total {}\n", prefix_cache_reused_tokens_.load());
  gauge(out, "requests_waiting", "Requests in the queue, waiting for a KV-cache slot", gauges.waiting);
  gauge(out, "requests_running", "Sequences in the running batch", gauges.running);
  gauge(out, "kv_slots", "KV-cache slots (the most sequences decoded together)", gauges.slots);
  gauge(out, "context_tokens", "Tokens per KV-cache slot (prompt + answer)", gauges.context);
  const int64_t kv_tokens = kv_cache_tokens_.load(), kv_capacity = kv_cache_capacity_.load();
  gauge(out, "kv_cache_tokens", "Tokens in the KV cache of running sequences", kv_tokens);
  gauge(out, "kv_cache_usage_ratio", "KV-cache tokens of running sequences over slots x context tokens",
        kv_capacity > 0 ? static_cast<double>(kv_tokens) / static_cast<double>(kv_capacity) : 0.0);
  batch_size.render(out, "batch_size", "Sequences per decode step");
  decode_step_seconds.render(out, "decode_step_seconds", "Time of one batched decode step");
  time_to_first_token_seconds.render(out, "time_to_first_token_seconds", "From arrival to the first token");
  request_seconds.render(out, "request_seconds", "From arrival to the last token");
  queue_seconds.render(out, "queue_seconds", "Time spent waiting for a slot");
  inter_token_seconds.render(out, "inter_token_latency_seconds", "Time between two tokens of one sequence");
  header(out, "memory_bytes", "Bytes of tensors allocated on the device (nvfp4lm's memory tracker)", "gauge");
  out += fmt::format("nvfp4lm_memory_bytes{{device=\"{}\"}} {}\n", gauges.device, gauges.device_bytes);
  gauge(out, "process_resident_memory_bytes", "Resident set size of the process", gauges.rss_bytes);
  gauge(out, "http_connections", "Open client connections", gauges.connections);
  header(out, "http_connections_closed_total",
         "Connections the server closed because they passed a deadline or the connection limit, by reason", "counter");
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [reason, count] : connections_closed_)
      out += fmt::format("nvfp4lm_http_connections_closed_total{{reason=\"{}\"}} {}\n", reason, count);
  }
  return out;
}

}  // namespace nvfp4lm::serve
