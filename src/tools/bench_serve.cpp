// See bench_serve.h.
#include "tools/bench_serve.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "serve/http_client.h"

namespace nvfp4lm {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The value of the Prometheus sample `name` (no labels) in `text`, 0 when absent.
double scraped(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? 0.0 : std::stod(text.substr(at + name.size() + 2));
}

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

std::vector<std::string> request_bodies(const ServeBenchOptions& options, int64_t vocab) {
  Rng rng(options.seed);
  std::vector<std::string> bodies;
  for (int64_t r = 0; r < options.requests; ++r) {
    std::vector<int32_t> prompt;
    for (int64_t t = 0; t < options.prompt_tokens; ++t)
      prompt.push_back(static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocab)));
    bodies.push_back(json{{"prompt", prompt}, {"max_tokens", options.generate_tokens}, {"temperature", 0}}.dump());
  }
  return bodies;
}

}  // namespace

ServeLoadResult run_serve_load(const Qwen3Model& model, const Tokenizer& tokenizer, const ServeBenchOptions& options,
                               int64_t max_batch) {
  NVFP4LM_CHECK(
      options.requests > 0 && options.concurrency > 0 && options.prompt_tokens > 0 && options.generate_tokens > 0,
      "bench serve: --requests, --concurrency, --prompt-len and --gen must be positive");
  serve::ServeOptions serve_options;
  serve_options.http.port = 0;
  serve_options.http.model_name = "bench";
  serve_options.max_batch = max_batch;
  serve_options.context = options.prompt_tokens + options.generate_tokens;
  serve_options.max_queue = options.requests;
  serve_options.decode = options.decode;
  serve::Server server(model, tokenizer, serve_options);
  std::thread runner([&] { server.run(); });

  const int64_t vocab = std::min<int64_t>(model.config().vocab_size, static_cast<int64_t>(tokenizer.vocab_size()));
  const std::vector<std::string> bodies = request_bodies(options, vocab);
  std::atomic<int64_t> next{0};
  std::mutex mutex;
  ServeLoadResult result;
  result.max_batch = server.engine().slots();
  result.requests = options.requests;
  std::vector<double> latencies;
  const auto start = Clock::now();
  std::vector<std::thread> clients;
  for (int64_t c = 0; c < std::min(options.concurrency, options.requests); ++c) {
    clients.emplace_back([&] {
      serve::HttpClient client("127.0.0.1", server.port(), /*timeout_s=*/3600);
      for (int64_t r = next++; r < options.requests; r = next++) {
        const auto sent = Clock::now();
        const serve::HttpClientResponse response = client.post("/v1/completions", bodies[static_cast<size_t>(r)]);
        const double seconds = std::chrono::duration<double>(Clock::now() - sent).count();
        const std::lock_guard<std::mutex> lock(mutex);
        if (response.status != 200) {
          if (result.failed++ == 0)
            result.first_failure =
                response.ok() ? fmt::format("HTTP {}: {}", response.status, response.body) : response.error;
          continue;
        }
        latencies.push_back(seconds);
        result.generated_tokens += json::parse(response.body)["usage"]["completion_tokens"].get<int64_t>();
      }
    });
  }
  for (std::thread& client : clients) client.join();
  result.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();

  const serve::HttpClientResponse metrics = serve::HttpClient("127.0.0.1", server.port()).get("/metrics");
  server.shutdown();
  runner.join();
  NVFP4LM_CHECK(metrics.status == 200, "bench serve: could not read the server's /metrics");
  result.decode_tokens = scraped(metrics.body, "nvfp4lm_batch_size_sum");
  result.decode_seconds = scraped(metrics.body, "nvfp4lm_decode_step_seconds_sum");
  const double steps = scraped(metrics.body, "nvfp4lm_batch_size_count");
  const double ttft_count = scraped(metrics.body, "nvfp4lm_time_to_first_token_seconds_count");
  result.mean_batch = steps > 0 ? result.decode_tokens / steps : 0;
  result.decode_tokens_per_second = result.decode_seconds > 0 ? result.decode_tokens / result.decode_seconds : 0;
  result.mean_time_to_first_token_seconds =
      ttft_count > 0 ? scraped(metrics.body, "nvfp4lm_time_to_first_token_seconds_sum") / ttft_count : 0;
  result.tokens_per_second = result.generated_tokens / result.wall_seconds;
  result.requests_per_second = static_cast<double>(result.requests - result.failed) / result.wall_seconds;
  result.latency_p50_seconds = percentile(latencies, 0.5);
  result.latency_p95_seconds = percentile(latencies, 0.95);
  return result;
}

json serve_load_json(const ServeLoadResult& r) {
  return {{"max_batch", r.max_batch},
          {"requests", r.requests},
          {"failed", r.failed},
          {"generated_tokens", r.generated_tokens},
          {"wall_seconds", r.wall_seconds},
          {"tokens_per_second", r.tokens_per_second},
          {"requests_per_second", r.requests_per_second},
          {"decode_tokens", r.decode_tokens},
          {"decode_seconds", r.decode_seconds},
          {"decode_tokens_per_second", r.decode_tokens_per_second},
          {"mean_batch", r.mean_batch},
          {"latency_p50_seconds", r.latency_p50_seconds},
          {"latency_p95_seconds", r.latency_p95_seconds},
          {"mean_time_to_first_token_seconds", r.mean_time_to_first_token_seconds}};
}

std::string serve_bench_table(const ServeLoadResult& batched, const ServeLoadResult& sequential) {
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  std::string text = fmt::format("{:<30} {:>14} {:>14} {:>8}\n", "", fmt::format("batched ({})", batched.max_batch),
                                 "one at a time", "ratio");
  auto row = [&](const char* name, double a, double b, const char* format) {
    text += fmt::format("{:<30} {:>14} {:>14} {:>7.2f}x\n", name, fmt::format(fmt::runtime(format), a),
                        fmt::format(fmt::runtime(format), b), ratio(a, b));
  };
  row("decode tokens/s", batched.decode_tokens_per_second, sequential.decode_tokens_per_second, "{:.1f}");
  row("end-to-end tokens/s", batched.tokens_per_second, sequential.tokens_per_second, "{:.1f}");
  row("requests/s", batched.requests_per_second, sequential.requests_per_second, "{:.2f}");
  row("wall seconds", batched.wall_seconds, sequential.wall_seconds, "{:.2f}");
  row("mean batch size", batched.mean_batch, sequential.mean_batch, "{:.2f}");
  row("latency p50 (s)", batched.latency_p50_seconds, sequential.latency_p50_seconds, "{:.3f}");
  row("latency p95 (s)", batched.latency_p95_seconds, sequential.latency_p95_seconds, "{:.3f}");
  row("mean time to first token (s)", batched.mean_time_to_first_token_seconds,
      sequential.mean_time_to_first_token_seconds, "{:.3f}");
  text +=
      fmt::format("{:<30} {:>14} {:>14}\n", "generated tokens", batched.generated_tokens, sequential.generated_tokens);
  text += fmt::format("{:<30} {:>14} {:>14}\n", "failed requests", batched.failed, sequential.failed);
  return text;
}

}  // namespace nvfp4lm
