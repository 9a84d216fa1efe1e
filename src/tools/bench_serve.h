// The load test behind `nvfp4lm bench serve`: the model behind the OpenAI server (serve/server.h) on a loopback
// port, and N requests (POST /v1/completions, random token-id prompts of P tokens, G greedy tokens each, no stop
// but end-of-sequence) sent by C client threads over keep-alive connections; it ends when every request was
// answered. Run twice in one process, with the same requests: batched (--max-batch slots) and one at a time
// (--max-batch 1: the same server, requests queue and run singly), so the ratio is measured on one machine in one
// run. Reported per run:
//  - end-to-end generated tokens/s (all tokens / wall time) and requests/s;
//  - decode tokens/s: tokens produced by batched decode steps / time spent in them (the server's own
//    nvfp4lm_batch_size_sum and nvfp4lm_decode_step_seconds_sum from /metrics), the number the batching is for;
//  - mean batch size, client-side latency p50 / p95 and the server's mean time to first token.
// Any request that fails (not 200) is counted, and the command then fails.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "model/qwen3_model.h"
#include "serve/server.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

struct ServeBenchOptions {
  int64_t requests = 64;
  int64_t concurrency = 16;
  int64_t prompt_tokens = 32;
  int64_t generate_tokens = 64;
  int64_t max_batch = 16;
  uint64_t seed = 0;  // the prompts' random ids
  std::optional<DecodeMode> decode;
};

struct ServeLoadResult {
  int64_t max_batch = 0;
  int64_t requests = 0, failed = 0;
  std::string first_failure;
  int64_t generated_tokens = 0;
  double wall_seconds = 0;
  double tokens_per_second = 0;  // generated tokens / wall time
  double requests_per_second = 0;
  double decode_tokens = 0;   // tokens made by decode steps (the server's batch_size sum)
  double decode_seconds = 0;  // time in decode steps
  double decode_tokens_per_second = 0;
  double mean_batch = 0;
  double latency_p50_seconds = 0, latency_p95_seconds = 0;
  double mean_time_to_first_token_seconds = 0;
};

// One run: a fresh server with `max_batch` slots, the load, the server's metrics, shutdown.
ServeLoadResult run_serve_load(const Qwen3Model& model, const Tokenizer& tokenizer, const ServeBenchOptions& options,
                               int64_t max_batch);

nlohmann::json serve_load_json(const ServeLoadResult& result);
// The table of both runs and their ratios.
std::string serve_bench_table(const ServeLoadResult& batched, const ServeLoadResult& sequential);

}  // namespace nvfp4lm
