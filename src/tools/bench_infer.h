// The inference benchmark behind `nvfp4lm bench infer`: prefill of a prompt of N tokens, then G greedy decode
// steps (no end-of-sequence stop, so exactly G tokens), on a CachedLm, with the numbers a reader needs to judge
// them against the machine:
//  - prefill tokens/s, decode tokens/s, time to first token, peak memory (device tracker and RSS);
//  - achieved weight bandwidth: the bytes of weights one decode step reads (qwen3_cached_lm.h) divided by the mean
//    step time, in GB/s (1e9 bytes/s) — decode of a batch of one is bound by reading the weights;
//  - the ceiling it is measured against, in the same run: a device-to-device copy on CUDA, a multithreaded memcpy
//    on the CPU. Copy bandwidth counts bytes read plus bytes written (STREAM's convention), so the ratio compares
//    total memory traffic; a decode step's traffic is essentially its weight reads.
// A short warm-up (a few prefill tokens and decode steps, then the cache is cleared) comes first so one-time
// allocations and lazy initialisation are not timed.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/device.h"
#include "infer/cached_lm.h"
#include "model/qwen3_decode_step.h"
#include "model/qwen3_model.h"

namespace nvfp4lm {

struct InferBenchOptions {
  int64_t prompt_tokens = 128;
  int64_t generate_tokens = 64;
  uint64_t seed = 0;  // the prompt's random token ids
};

struct CopyBandwidth {
  std::string method;   // "memcpy (2 OpenMP threads)", "cudaMemcpy device-to-device"
  uint64_t bytes = 0;   // size of one copy
  double gb_per_s = 0;  // (read + written) bytes / s / 1e9, best of several runs
};

// Measures the copy ceiling of `device` with buffers of `bytes` (well above the last-level cache).
CopyBandwidth measure_copy_bandwidth(Device device, uint64_t bytes = 256ull << 20);

struct InferBenchResult {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double time_to_first_token_seconds = 0;
  double decode_seconds = 0;  // generated_tokens - 1 decode steps
  double prefill_tokens_per_second = 0;
  double decode_tokens_per_second = 0;
  uint64_t weight_bytes_per_step = 0;
  double weight_gb_per_s = 0;  // weight_bytes_per_step / mean decode step time / 1e9
  CopyBandwidth copy;
  double percent_of_copy = 0;  // weight_gb_per_s / copy.gb_per_s * 100
  size_t peak_device_bytes = 0;
  size_t peak_rss_bytes = 0;
  bool chosen_on_device = false;  // greedy tokens picked where the logits are (CUDA) rather than on a host copy
  // The first calls, as a one-shot `generate` sees them: the prefill of the whole prompt (0 where the warm-up fed
  // fewer tokens: the CPU's) and the first decode steps (on CUDA the first runs op by op, the second captures
  // the graph).
  double cold_prefill_seconds = 0;
  std::vector<double> cold_decode_step_seconds;
};

// The lm's cache must hold prompt_tokens + generate_tokens - 1 tokens; it is left empty afterwards. The peak
// memory is read at the end of the run, so measure the copy ceiling afterwards (its buffers would count) and
// attach it with set_copy_ceiling.
InferBenchResult run_infer_bench(CachedLm& lm, uint64_t weight_bytes_per_step, const InferBenchOptions& options);
void set_copy_ceiling(InferBenchResult& result, const CopyBandwidth& copy);

nlohmann::json infer_bench_json(const InferBenchResult& result);
std::string infer_bench_table(const InferBenchResult& result);

// Batched decode, the serve path's step (model/qwen3_decode_step.h: every row computed as if alone): `batch`
// sequences of options.prompt_tokens random ids, prefilled together, then options.generate_tokens - 1 decode steps
// of all rows at once (two untimed warm-up steps first, which capture the CUDA graph in DecodeMode::Graph).
struct BatchedDecodeResult {
  int64_t batch = 0;
  int64_t steps = 0;
  double seconds = 0;
  double tokens_per_second = 0;  // batch * steps / seconds: every row's tokens
  double step_ms = 0;
  std::string decode_path;  // "CUDA graph of 612 nodes", "eager"
};
// adapters > 0: the model's LoRA adapters (model/lora_runtime.h) over the rows, row b with adapter b % adapters (the
// serve path's mix of requests of different adapters in one step); the prompt is prefilled without them (its work
// is not timed).
BatchedDecodeResult run_batched_decode_bench(const Qwen3Model& model, int64_t batch, const InferBenchOptions& options,
                                             DecodeMode mode, int adapters = 0);
nlohmann::json batched_decode_json(const BatchedDecodeResult& result, double batch_one_tokens_per_second);
// One table row a batch: aggregate tok/s, ms a step, speed-up over batch 1.
std::string batched_decode_table(const std::vector<BatchedDecodeResult>& results, double batch_one_tokens_per_second);

}  // namespace nvfp4lm
