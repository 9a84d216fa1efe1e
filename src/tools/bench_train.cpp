// See bench_train.h. The FLOP count, the GEMM ceilings, the timed steps and
// the formatting.
#include "tools/bench_train.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>

#include "core/error.h"
#include "core/rng.h"
#include "core/stopwatch.h"
#include "core/tensor.h"
#include "io/synth_model.h"
#include "ops/gemm.h"
#include "train/train_step.h"

namespace nvfp4lm {
namespace {

// Ids at and above this are Qwen3's special tokens; random rows stay below (smaller vocabularies: all ids).
constexpr int64_t kOrdinaryTokenIds = 151643;

// ---- timing helpers ---------------------------------------------------------------------------------------------

// Uniform [-1, 1) values in the compute dtype of `device` (random, not zeros: GPU power and so clocks depend on
// the data).
Tensor random_operand(const Shape& shape, Device device, uint64_t seed) {
  Tensor values = Tensor::empty(shape, DType::F32, Device::cpu());
  float* v = values.data<float>();
  const int64_t count = values.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) v[i] = 2.0f * counter_uniform(seed, static_cast<uint64_t>(i)) - 1.0f;
  if (device.is_cpu()) return values;
  Tensor bf16 = Tensor::empty(shape, DType::BF16, Device::cpu());
  convert_cpu(values, bf16);
  return bf16.to(device);
}

std::string gemm_method(Device device) {
  if (device.is_cpu()) {
    const char* config = openblas_get_config();
    return fmt::format("OpenBLAS cblas_sgemm, fp32, {} threads ({})", openblas_get_num_threads(),
                       config != nullptr ? config : "?");
  }
  return "cuBLASLt GEMM, BF16 in/out, fp32 accumulation (ops/gemm.h)";
}

// C[m, n] = A[m, k] · B[n, k]ᵀ. Calls are batched between synchronisations so that a small GEMM on a GPU is not
// measured as the launch + sync latency: a batch lasts about 20 ms; the best of 5 batches counts.
GemmCeiling time_gemm(Device device, std::string name, int64_t m, int64_t n, int64_t k) {
  const DType dtype = device.is_cpu() ? DType::F32 : DType::BF16;
  const Tensor a = random_operand({m, k}, device, 1);
  const Tensor b = random_operand({n, k}, device, 2);
  Tensor c = Tensor::empty({m, n}, dtype, device);
  gemm(a, false, b, true, c);  // warm-up: thread pools, cuBLASLt heuristics, page faults
  synchronize(device);
  auto start = Clock::now();
  gemm(a, false, b, true, c);
  synchronize(device);
  const double one = std::max(seconds_since(start), 1e-7);
  const int calls = static_cast<int>(std::clamp(0.02 / one, 1.0, 1000.0));
  double best = 1e30;
  for (int batch = 0; batch < 5; ++batch) {
    start = Clock::now();
    for (int call = 0; call < calls; ++call) gemm(a, false, b, true, c);
    synchronize(device);
    best = std::min(best, seconds_since(start) / calls);
  }
  GemmCeiling ceiling;
  ceiling.name = std::move(name);
  ceiling.m = m;
  ceiling.n = n;
  ceiling.k = k;
  ceiling.method = gemm_method(device);
  ceiling.seconds = best;
  ceiling.gflop_per_s = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / best / 1e9;
  return ceiling;
}

// One step's random rows: ids [B, T] and targets = the next id of the same random sequence (every position trained).
TrainBatch random_batch(Rng& rng, int64_t batch, int64_t seq_len, int64_t vocab) {
  const auto id_range = static_cast<uint64_t>(std::min(vocab, kOrdinaryTokenIds));
  std::vector<int32_t> ids(static_cast<size_t>(batch * seq_len)), targets(ids.size());
  for (int64_t row = 0; row < batch; ++row) {
    auto next = static_cast<int32_t>(rng.below(id_range));
    for (int64_t t = 0; t < seq_len; ++t) {
      const auto at = static_cast<size_t>(row * seq_len + t);
      ids[at] = next;
      next = static_cast<int32_t>(rng.below(id_range));
      targets[at] = next;
    }
  }
  TrainBatch out;
  out.ids = Tensor::from_ints(ids, Shape{batch, seq_len});
  out.targets = Tensor::from_ints(targets, Shape{batch, seq_len});
  return out;
}

struct StepTimes {
  double forward_backward = 0, optimizer = 0, refresh = 0;
  double total() const { return forward_backward + optimizer + refresh; }
};

std::string percent(double part, double whole) {
  return whole > 0 ? fmt::format("{:.1f} %", 100.0 * part / whole) : "-";
}

}  // namespace

TrainFlops train_step_flops(const Qwen3Config& config, int64_t batch, int64_t seq_len) {
  const double tokens = static_cast<double>(batch) * static_cast<double>(seq_len);
  const int64_t linear_parameters =
      config.num_hidden_layers * (config.attention_parameters_per_layer() + config.mlp_parameters_per_layer());
  const int64_t head_parameters = config.vocab_size * config.hidden_size;
  TrainFlops flops;
  flops.matmul_parameters = linear_parameters + head_parameters;
  flops.linear = 6.0 * static_cast<double>(linear_parameters) * tokens;
  flops.lm_head = 6.0 * static_cast<double>(head_parameters) * tokens;
  flops.attention = 6.0 * static_cast<double>(config.num_hidden_layers) * static_cast<double>(batch) *
                    static_cast<double>(seq_len) * static_cast<double>(seq_len) *
                    static_cast<double>(config.num_attention_heads) * static_cast<double>(config.head_dim);
  return flops;
}

void check_train_bench_options(const TrainBenchOptions& options) {
  NVFP4LM_CHECK(options.seq_len > 0, "--seq-len must be positive, got {}", options.seq_len);
  NVFP4LM_CHECK(options.batch > 0, "--batch must be positive, got {}", options.batch);
  NVFP4LM_CHECK(options.steps > 0, "--steps must be positive, got {}", options.steps);
  NVFP4LM_CHECK(options.warmup_steps >= 0, "--warmup-steps must be >= 0, got {}", options.warmup_steps);
  NVFP4LM_CHECK(std::isfinite(options.lr) && options.lr > 0, "--lr must be positive, got {}", options.lr);
  NVFP4LM_CHECK(std::isfinite(options.max_grad_norm) && options.max_grad_norm >= 0,
                "the max grad norm must be >= 0 (0: no clipping), got {}", options.max_grad_norm);
}

std::vector<GemmCeiling> measure_gemm_ceilings(Device device, const Qwen3Config& config, int64_t tokens,
                                               int64_t square_size) {
  if (square_size == 0) square_size = device.is_cpu() ? 2048 : 8192;
  NVFP4LM_CHECK(square_size > 0 && tokens > 0, "GEMM ceiling: square size {} and tokens {} must be positive",
                square_size, tokens);
  std::vector<GemmCeiling> ceilings;
  ceilings.push_back(time_gemm(device, fmt::format("square {}", square_size), square_size, square_size, square_size));
  const int64_t hidden = config.hidden_size, intermediate = config.intermediate_size;
  ceilings.push_back(time_gemm(device, fmt::format("mlp up [{}, {}] x [{}, {}]", tokens, hidden, hidden, intermediate),
                               tokens, intermediate, hidden));
  return ceilings;
}

TrainBenchResult run_train_bench(Qwen3Trainable& model, Optimizer& optimizer, const TrainBenchOptions& options) {
  check_train_bench_options(options);
  const Qwen3Config& config = model.config();
  NVFP4LM_CHECK(options.seq_len <= config.max_position_embeddings,
                "--seq-len {} exceeds the model's context of {} tokens", options.seq_len,
                config.max_position_embeddings);
  // The FLOP count assumes every layer trains (a frozen layer has no weight-gradient GEMMs).
  NVFP4LM_CHECK(model.options().train_last_layers < 0,
                "bench train measures full training; the model trains only "
                "its last {} layers",
                model.options().train_last_layers);
  const Device device = model.device();
  const std::span<Parameter> parameters = model.parameters();

  TrainBenchResult result;
  result.device = device;
  result.batch = options.batch;
  result.seq_len = options.seq_len;
  result.tokens_per_step = options.batch * options.seq_len;
  result.steps = options.steps;
  result.warmup_steps = options.warmup_steps;
  result.vocab_size = config.vocab_size;
  for (const Parameter& p : parameters) result.trained_parameters += p.value.numel();
  result.optimizer_state_bytes = optimizer.state_bytes();
  result.flops = train_step_flops(config, options.batch, options.seq_len);

  Rng rng(options.seed);
  const auto grad_scale = static_cast<float>(1.0 / static_cast<double>(result.tokens_per_step));
  StepTimes sums;
  const int64_t total_steps = options.warmup_steps + options.steps;
  for (int64_t step = 0; step < total_steps; ++step) {
    const TrainBatch batch = random_batch(rng, options.batch, options.seq_len, config.vocab_size);
    StepTimes times;
    auto start = Clock::now();
    model.zero_grad();
    StepSettings settings;
    settings.grad_scale = grad_scale;
    settings.lr = options.lr;
    settings.max_grad_norm = options.max_grad_norm;
    // A fused step is one part (its optimizer and refresh run inside the backward): all of it is "forward+backward".
    const StepResult update = take_train_step(model, optimizer, std::span(&batch, 1), settings, [&](StepPart part) {
      synchronize(device);
      (part == StepPart::Backward    ? times.forward_backward
       : part == StepPart::Optimizer ? times.optimizer
                                     : times.refresh) = seconds_since(start);
      start = Clock::now();
    });
    const double loss = update.stats.mean();
    NVFP4LM_CHECK(update.applied && update.skipped_groups.empty(),
                  "bench train: step {} has a non-finite loss ({}) or gradient norm ({}); try a smaller --lr", step + 1,
                  loss, update.grad_norm);

    if (step == 0) result.first_loss = loss;
    result.last_loss = loss;
    if (step < options.warmup_steps) continue;
    result.step_seconds.push_back(times.total());
    sums.forward_backward += times.forward_backward;
    sums.optimizer += times.optimizer;
    sums.refresh += times.refresh;
  }

  const auto timed = static_cast<double>(options.steps);
  result.forward_backward_seconds = sums.forward_backward / timed;
  result.optimizer_seconds = sums.optimizer / timed;
  result.refresh_seconds = sums.refresh / timed;
  result.mean_step_seconds = sums.total() / timed;
  result.tokens_per_second = static_cast<double>(result.tokens_per_step) / result.mean_step_seconds;
  result.achieved_gflop_per_s = result.flops.total() / result.mean_step_seconds / 1e9;

  const MemoryTracker& tracker = MemoryTracker::instance();
  // "startup" is the tracker's name for no phase (here: between the phases of a step), not a phase of its own.
  for (const PhasePeak& peak : tracker.phase_peaks())
    if (peak.device == device && peak.phase != "startup") result.memory_phases.push_back(peak);
  result.peak_device_bytes = tracker.peak_bytes(device);
  result.peak_rss_bytes = peak_rss_bytes();
  return result;
}

void set_gemm_ceilings(TrainBenchResult& result, std::vector<GemmCeiling> gemms) {
  result.gemms = std::move(gemms);
  result.ceiling_gflop_per_s = 0;
  result.ceiling_name.clear();
  for (const GemmCeiling& gemm : result.gemms) {
    if (gemm.gflop_per_s > result.ceiling_gflop_per_s) {
      result.ceiling_gflop_per_s = gemm.gflop_per_s;
      result.ceiling_name = gemm.name;
    }
  }
  result.ratio_of_ceiling =
      result.ceiling_gflop_per_s > 0 ? result.achieved_gflop_per_s / result.ceiling_gflop_per_s : 0;
}

nlohmann::json train_bench_json(const TrainBenchResult& r) {
  nlohmann::json gemms = nlohmann::json::array();
  for (const GemmCeiling& g : r.gemms)
    gemms.push_back({{"name", g.name},
                     {"m", g.m},
                     {"n", g.n},
                     {"k", g.k},
                     {"method", g.method},
                     {"seconds", g.seconds},
                     {"gflop_per_s", g.gflop_per_s}});
  nlohmann::json phases = nlohmann::json::object();
  for (const PhasePeak& peak : r.memory_phases) phases[peak.phase] = peak.peak_bytes;
  nlohmann::json steps_ms = nlohmann::json::array();
  for (double seconds : r.step_seconds) steps_ms.push_back(seconds * 1e3);
  return {{"batch", r.batch},
          {"seq_len", r.seq_len},
          {"tokens_per_step", r.tokens_per_step},
          {"steps", r.steps},
          {"warmup_steps", r.warmup_steps},
          {"trained_parameters", r.trained_parameters},
          {"optimizer_state_bytes", r.optimizer_state_bytes},
          {"step_ms", r.mean_step_seconds * 1e3},
          {"step_ms_each", steps_ms},
          {"forward_backward_ms", r.forward_backward_seconds * 1e3},
          {"optimizer_ms", r.optimizer_seconds * 1e3},
          {"refresh_ms", r.refresh_seconds * 1e3},
          {"tokens_per_s", r.tokens_per_second},
          {"first_loss", r.first_loss},
          {"last_loss", r.last_loss},
          {"ln_vocab", std::log(static_cast<double>(r.vocab_size))},
          {"matmul_parameters", r.flops.matmul_parameters},
          {"flops_per_step", r.flops.total()},
          {"flops_per_step_linear", r.flops.linear},
          {"flops_per_step_lm_head", r.flops.lm_head},
          {"flops_per_step_attention", r.flops.attention},
          {"achieved_gflop_per_s", r.achieved_gflop_per_s},
          {"gemms", gemms},
          {"ceiling_gemm", r.ceiling_name},
          {"ceiling_gflop_per_s", r.ceiling_gflop_per_s},
          {"ratio_of_ceiling", r.ratio_of_ceiling},
          {"memory_phase_peak_bytes", phases},
          {"peak_device_bytes", r.peak_device_bytes},
          {"peak_rss_bytes", r.peak_rss_bytes}};
}

std::string train_bench_table(const TrainBenchResult& r) {
  std::string text;
  auto row = [&](const std::string& name, const std::string& value) {
    text += fmt::format("{:<28} {}\n", name, value);
  };
  row("tokens per step",
      fmt::format("{} ({} rows x {} tokens, every position a target)", r.tokens_per_step, r.batch, r.seq_len));
  row("steps", fmt::format("{} timed after {} warm-up", r.steps, r.warmup_steps));
  const auto [fastest, slowest] = std::minmax_element(r.step_seconds.begin(), r.step_seconds.end());
  row("step",
      fmt::format("{:.1f} ms (min {:.1f}, max {:.1f})", r.mean_step_seconds * 1e3, *fastest * 1e3, *slowest * 1e3));
  row("  forward+backward", fmt::format("{:.1f} ms ({})", r.forward_backward_seconds * 1e3,
                                        percent(r.forward_backward_seconds, r.mean_step_seconds)));
  row("  optimizer", fmt::format("{:.1f} ms ({}; grad norm + update)", r.optimizer_seconds * 1e3,
                                 percent(r.optimizer_seconds, r.mean_step_seconds)));
  row("  QAT refresh",
      fmt::format("{:.1f} ms ({})", r.refresh_seconds * 1e3, percent(r.refresh_seconds, r.mean_step_seconds)));
  row("throughput", fmt::format("{:.1f} tokens/s", r.tokens_per_second));
  const double total = r.flops.total();
  row("model FLOPs per step",
      fmt::format("{:.2f} GFLOP (linear {}, lm_head {}, attention {})", total / 1e9, percent(r.flops.linear, total),
                  percent(r.flops.lm_head, total), percent(r.flops.attention, total)));
  row("achieved", fmt::format("{:.2f} GFLOP/s", r.achieved_gflop_per_s));
  if (!r.gemms.empty()) row("GEMM ceiling method", r.gemms.front().method);
  for (const GemmCeiling& g : r.gemms)
    row("GEMM ceiling", fmt::format("{:.2f} GFLOP/s, {} ({:.2f} ms)", g.gflop_per_s, g.name, g.seconds * 1e3));
  if (!r.gemms.empty())
    row("achieved / best GEMM", fmt::format("{:.3f} (MFU against {})", r.ratio_of_ceiling, r.ceiling_name));
  row("loss", fmt::format("{:.4f} -> {:.4f} (ln vocab = {:.4f})", r.first_loss, r.last_loss,
                          std::log(static_cast<double>(r.vocab_size))));
  row("trained parameters",
      fmt::format("{:.2f}M; optimizer state {:.1f} MiB", r.trained_parameters / 1e6, to_mib(r.optimizer_state_bytes)));
  for (const PhasePeak& peak : r.memory_phases)
    row("peak memory, " + peak.phase, fmt::format("{:.3f} GiB", to_gib(peak.peak_bytes)));
  row("peak memory", fmt::format("{:.3f} GiB tracked on {}, {:.3f} GiB host RSS", to_gib(r.peak_device_bytes),
                                 r.device.label(), to_gib(r.peak_rss_bytes)));
  return text;
}

}  // namespace nvfp4lm
