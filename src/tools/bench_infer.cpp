// See bench_infer.h.
#include "tools/bench_infer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#include "core/rng.h"
#include "core/stopwatch.h"
#include "core/tensor.h"
#include "infer/sampler.h"
#if NVFP4LM_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

namespace nvfp4lm {
namespace {

constexpr int kCopyRepeats = 5;

CopyBandwidth cpu_copy_bandwidth(uint64_t bytes) {
  // Plain new[] (not tracked: this is a measurement, not model memory). Pages are touched before timing.
  std::unique_ptr<char[]> src(new char[bytes]), dst(new char[bytes]);
  const int threads = omp_get_max_threads();
  const int64_t chunk = static_cast<int64_t>((bytes + static_cast<uint64_t>(threads) - 1) / threads);
  auto parallel_copy = [&](int value) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < threads; ++t) {
      const int64_t begin = std::min<int64_t>(t * chunk, static_cast<int64_t>(bytes));
      const int64_t end = std::min<int64_t>(begin + chunk, static_cast<int64_t>(bytes));
      if (value >= 0) {
        std::memset(src.get() + begin, value, static_cast<size_t>(end - begin));
        std::memset(dst.get() + begin, 0, static_cast<size_t>(end - begin));
      } else {
        std::memcpy(dst.get() + begin, src.get() + begin, static_cast<size_t>(end - begin));
      }
    }
  };
  parallel_copy(1);  // first touch, from the threads that will copy
  double best = 1e30;
  for (int repeat = 0; repeat < kCopyRepeats; ++repeat) {
    const auto start = Clock::now();
    parallel_copy(-1);
    best = std::min(best, seconds_since(start));
  }
  NVFP4LM_ASSERT(dst[bytes - 1] == 1, "memcpy did not copy");
  return {fmt::format("memcpy ({} OpenMP threads)", threads), bytes, 2.0 * static_cast<double>(bytes) / best / 1e9};
}

#if NVFP4LM_HAS_CUDA
CopyBandwidth cuda_copy_bandwidth(Device device, uint64_t bytes) {
  Tensor src = Tensor::zeros({static_cast<int64_t>(bytes)}, DType::U8, device);
  Tensor dst = Tensor::zeros({static_cast<int64_t>(bytes)}, DType::U8, device);
  cuda::copy(dst.raw(), true, src.raw(), true, bytes);  // warm-up
  cuda::synchronize();
  double best = 1e30;
  for (int repeat = 0; repeat < kCopyRepeats; ++repeat) {
    const auto start = Clock::now();
    cuda::copy(dst.raw(), true, src.raw(), true, bytes);
    cuda::synchronize();
    best = std::min(best, seconds_since(start));
  }
  return {"cudaMemcpy device-to-device", bytes, 2.0 * static_cast<double>(bytes) / best / 1e9};
}
#endif

}  // namespace

CopyBandwidth measure_copy_bandwidth(Device device, uint64_t bytes) {
  if (device.is_cpu()) return cpu_copy_bandwidth(bytes);
#if NVFP4LM_HAS_CUDA
  return cuda_copy_bandwidth(device, bytes);
#else
  NVFP4LM_FAIL("measure_copy_bandwidth: {} needs a CUDA build", device.str());
#endif
}

InferBenchResult run_infer_bench(CachedLm& lm, uint64_t weight_bytes_per_step, const InferBenchOptions& options) {
  NVFP4LM_CHECK(options.prompt_tokens > 0, "--prompt-len must be positive, got {}", options.prompt_tokens);
  NVFP4LM_CHECK(options.generate_tokens > 0, "--gen must be positive, got {}", options.generate_tokens);
  NVFP4LM_CHECK(options.prompt_tokens + options.generate_tokens - 1 <= lm.capacity(),
                "--prompt-len {} + --gen {} do not fit {}", options.prompt_tokens, options.generate_tokens,
                lm.capacity_note());
  // Random ids from the ordinary (non-special) range of the vocabulary.
  Rng rng(options.seed);
  const uint64_t id_range = static_cast<uint64_t>(std::min<int64_t>(lm.vocab_size(), 151643));
  std::vector<int32_t> prompt(static_cast<size_t>(options.prompt_tokens));
  for (auto& id : prompt) id = static_cast<int32_t>(rng.below(id_range));

  // The greedy next token where generation would pick it (CachedLm::prefers_choosing): where the logits are on
  // CUDA (one id comes back), else the argmax of the host copy.
  const bool in_model = lm.prefers_choosing();
  auto greedy = [&](std::span<const int32_t> ids, FedTokens fed) -> int32_t {
    if (!in_model) return argmax_logit(lm.append(ids, fed));
    TokenChoice choice;
    choice.candidates = lm.vocab_size();
    return lm.append_choose(ids, choice, fed);
  };

  // Warm-up (on CUDA this also captures the decode graph). On CUDA the whole prompt: a prefill of more than 8 rows
  // takes the dequantize + cuBLASLt path, whose first call loads cuBLASLt and picks its kernels (~0.1 s on an H200,
  // which made a 512-token prefill look 4x slower than it is); on the CPU 8 tokens, which touch every kernel.
  // The warm-up is what a one-shot `generate` pays: its prefill (the whole prompt on CUDA) and first decode steps
  // are timed as the cold figures.
  InferBenchResult result;
  lm.truncate(0);
  {
    const int64_t warm_tokens = in_model ? options.prompt_tokens : std::min<int64_t>(options.prompt_tokens, 8);
    const std::vector<int32_t> warm(prompt.begin(), prompt.begin() + warm_tokens);
    auto cold = Clock::now();
    int32_t token = greedy(warm, FedTokens::Prompt);
    if (warm_tokens == options.prompt_tokens) result.cold_prefill_seconds = seconds_since(cold);
    for (int step = 0; step < 2 && lm.length() < lm.capacity(); ++step) {
      const int32_t fed[1] = {token};
      cold = Clock::now();
      token = greedy(fed, FedTokens::Generated);
      result.cold_decode_step_seconds.push_back(seconds_since(cold));
    }
    lm.truncate(0);
  }

  result.prompt_tokens = options.prompt_tokens;
  result.generated_tokens = options.generate_tokens;
  result.weight_bytes_per_step = weight_bytes_per_step;
  result.chosen_on_device = in_model;
  const auto start = Clock::now();
  int32_t token = 0;
  std::span<const float> logits;
  {
    MemoryPhase phase("prefill");
    if (in_model) {
      token = greedy(prompt, FedTokens::Prompt);
    } else {
      logits = lm.append(prompt);
    }
  }
  result.prefill_seconds = seconds_since(start);
  if (!in_model) token = argmax_logit(logits);
  result.time_to_first_token_seconds = seconds_since(start);
  {
    MemoryPhase phase("decode");
    const auto decode_start = Clock::now();
    for (int64_t step = 1; step < options.generate_tokens; ++step) {
      const int32_t fed[1] = {token};
      token = greedy(fed, FedTokens::Generated);
    }
    result.decode_seconds = seconds_since(decode_start);
  }
  lm.truncate(0);

  const int64_t steps = options.generate_tokens - 1;
  result.prefill_tokens_per_second = static_cast<double>(options.prompt_tokens) / result.prefill_seconds;
  if (steps > 0 && result.decode_seconds > 0) {
    result.decode_tokens_per_second = static_cast<double>(steps) / result.decode_seconds;
    result.weight_gb_per_s = static_cast<double>(weight_bytes_per_step) * result.decode_tokens_per_second / 1e9;
  }
  result.peak_device_bytes = MemoryTracker::instance().peak_bytes(lm.device());
  result.peak_rss_bytes = peak_rss_bytes();
  return result;
}

void set_copy_ceiling(InferBenchResult& result, const CopyBandwidth& copy) {
  result.copy = copy;
  result.percent_of_copy = copy.gb_per_s > 0 ? 100.0 * result.weight_gb_per_s / copy.gb_per_s : 0;
}

BatchedDecodeResult run_batched_decode_bench(const Qwen3Model& model, int64_t batch, const InferBenchOptions& options,
                                             DecodeMode mode, int adapters) {
  NVFP4LM_CHECK(batch > 0, "--batch sizes must be positive, got {}", batch);
  NVFP4LM_CHECK(options.generate_tokens > 1, "batched decode needs --gen of at least 2, got {}",
                options.generate_tokens);
  NVFP4LM_CHECK(adapters == 0 || (model.lora_adapters() && adapters <= model.lora_adapters()->count()),
                "batched decode over {} adapters needs a model holding them (--lora)", adapters);
  const int64_t capacity = options.prompt_tokens + options.generate_tokens + 1;  // +2 warm-up steps, -1
  KVCache cache = model.make_cache(batch, capacity);
  Rng rng(options.seed + static_cast<uint64_t>(batch));
  const uint64_t id_range = static_cast<uint64_t>(std::min<int64_t>(model.config().vocab_size, 151643));
  std::vector<int32_t> prompt(static_cast<size_t>(batch * options.prompt_tokens));
  for (auto& id : prompt) id = static_cast<int32_t>(rng.below(id_range));
  model.forward_cached(Tensor::from_ints(prompt, {batch, options.prompt_tokens}), cache);

  // The fed tokens do not change the work of a step: a fixed random set per step, no logits read back.
  Qwen3DecodeStep step(model, cache, mode);
  std::vector<int32_t> ids(static_cast<size_t>(batch));
  auto next_ids = [&] {
    for (auto& id : ids) id = static_cast<int32_t>(rng.below(id_range));
  };
  // With adapters the rows go through run_rows (each row its adapter), which leaves cache.length() to the caller.
  std::vector<DecodeRow> rows(static_cast<size_t>(batch));
  int32_t position = static_cast<int32_t>(options.prompt_tokens);
  auto run_step = [&] {
    next_ids();
    if (adapters == 0) {
      step.run(ids);
      return;
    }
    for (int64_t b = 0; b < batch; ++b)
      rows[static_cast<size_t>(b)] = {ids[static_cast<size_t>(b)], position, static_cast<int32_t>(b),
                                      static_cast<int>(b % adapters)};
    step.run_rows(rows);
    ++position;
  };
  for (int warm = 0; warm < 2; ++warm) run_step();
  synchronize(model.device());
  cache.set_length(options.prompt_tokens);
  position = static_cast<int32_t>(options.prompt_tokens);

  BatchedDecodeResult result;
  result.batch = batch;
  result.steps = options.generate_tokens - 1;
  const auto start = Clock::now();
  for (int64_t s = 0; s < result.steps; ++s) run_step();
  synchronize(model.device());
  result.seconds = seconds_since(start);
  result.tokens_per_second = static_cast<double>(batch * result.steps) / result.seconds;
  result.step_ms = 1e3 * result.seconds / static_cast<double>(result.steps);
  result.decode_path = step.describe();
  return result;
}

nlohmann::json batched_decode_json(const BatchedDecodeResult& r, double batch_one_tokens_per_second) {
  return {{"batch", r.batch},
          {"decode_steps", r.steps},
          {"decode_seconds", r.seconds},
          {"decode_tokens_per_s", r.tokens_per_second},
          {"ms_per_step", r.step_ms},
          {"speedup_over_batch_1",
           batch_one_tokens_per_second > 0 ? r.tokens_per_second / batch_one_tokens_per_second : 0.0},
          {"decode_path", r.decode_path}};
}

std::string batched_decode_table(const std::vector<BatchedDecodeResult>& results, double batch_one_tokens_per_second) {
  std::string text;
  for (const BatchedDecodeResult& r : results)
    text += fmt::format("{:<28} {:.2f} tok/s ({:.2f} ms/step, {:.2f}x batch 1; {})\n",
                        fmt::format("decode, batch {}", r.batch), r.tokens_per_second, r.step_ms,
                        batch_one_tokens_per_second > 0 ? r.tokens_per_second / batch_one_tokens_per_second : 0.0,
                        r.decode_path);
  return text;
}

nlohmann::json infer_bench_json(const InferBenchResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"generated_tokens", r.generated_tokens},
          {"prefill_seconds", r.prefill_seconds},
          {"prefill_tokens_per_s", r.prefill_tokens_per_second},
          {"time_to_first_token_s", r.time_to_first_token_seconds},
          {"decode_seconds", r.decode_seconds},
          {"decode_tokens_per_s", r.decode_tokens_per_second},
          {"weight_bytes_per_decode_step", r.weight_bytes_per_step},
          {"weight_gb_per_s", r.weight_gb_per_s},
          {"copy_method", r.copy.method},
          {"copy_bytes", r.copy.bytes},
          {"copy_gb_per_s", r.copy.gb_per_s},
          {"weight_bandwidth_percent_of_copy", r.percent_of_copy},
          {"peak_device_bytes", r.peak_device_bytes},
          {"peak_rss_bytes", r.peak_rss_bytes},
          {"token_choice", r.chosen_on_device ? "device" : "host"},
          {"cold_prefill_seconds", r.cold_prefill_seconds},
          {"cold_decode_step_seconds", r.cold_decode_step_seconds}};
}

std::string infer_bench_table(const InferBenchResult& r) {
  std::string text;
  auto row = [&](const char* name, const std::string& value) { text += fmt::format("{:<28} {}\n", name, value); };
  row("prompt tokens", fmt::format("{}", r.prompt_tokens));
  row("generated tokens", fmt::format("{}", r.generated_tokens));
  row("prefill", fmt::format("{:.1f} tok/s ({:.3f} s)", r.prefill_tokens_per_second, r.prefill_seconds));
  row("time to first token", fmt::format("{:.3f} s", r.time_to_first_token_seconds));
  if (r.cold_prefill_seconds > 0) {
    // A plain loop: clang's libstdc++ 12 <ranges> rejects views::transform over a const vector here.
    std::vector<double> cold_step_ms;
    for (double t : r.cold_decode_step_seconds) cold_step_ms.push_back(1e3 * t);
    row("first call (cold)",
        fmt::format("prefill {:.3f} s ({:.1f} tok/s), decode steps {:.1f} ms", r.cold_prefill_seconds,
                    static_cast<double>(r.prompt_tokens) / r.cold_prefill_seconds, fmt::join(cold_step_ms, " / ")));
  }
  row("decode", r.generated_tokens > 1 ? fmt::format("{:.2f} tok/s ({:.2f} ms/step)", r.decode_tokens_per_second,
                                                     1e3 / r.decode_tokens_per_second)
                                       : std::string("n/a (--gen 1)"));
  row("weights read per step", fmt::format("{:.1f} MiB", to_mib(r.weight_bytes_per_step)));
  row("achieved weight bandwidth", fmt::format("{:.2f} GB/s", r.weight_gb_per_s));
  row("copy bandwidth (ceiling)",
      fmt::format("{:.2f} GB/s, {} of {:.0f} MiB, read+write", r.copy.gb_per_s, r.copy.method, to_mib(r.copy.bytes)));
  row("weight bandwidth / copy", fmt::format("{:.1f} %", r.percent_of_copy));
  row("peak memory",
      fmt::format("{:.3f} GiB tracked, {:.3f} GiB RSS", to_gib(r.peak_device_bytes), to_gib(r.peak_rss_bytes)));
  return text;
}

}  // namespace nvfp4lm
