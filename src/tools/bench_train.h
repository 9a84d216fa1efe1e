// The training benchmark behind `nvfp4lm bench train`: W warm-up then S timed optimizer steps of a Qwen3Trainable
// on random token rows (every row packed full, every position a target), each step exactly what the trainer does
// (trainer.h): zero_grad, forward_backward with grad_scale = 1 / tokens, global grad norm + clip coefficient,
// optimizer step, refresh_quantized. Reported next to the ceilings a reader needs to judge them:
//  - tokens/s and ms per step, split into forward+backward / optimizer (grad norm + update) / QAT refresh; on CUDA
//    the device is synchronised at each boundary, so the split is exact there too;
//  - achieved GFLOP/s (1 GFLOP = 1e9 floating-point operations) of the model FLOPs of a step (train_step_flops;
//    quantization, norms, softmax, the optimizer and the embedding are not counted, as in the usual MFU
//    convention), against the best dense GEMM measured in the same run on the same device and dtype (OpenBLAS
//    cblas_sgemm on the CPU, a BF16 cuBLASLt GEMM through ops/gemm.h on CUDA): a square GEMM and the model's MLP
//    up-projection shape [tokens, hidden] x [hidden, intermediate]. The ratio is an MFU against that GEMM, not
//    against a datasheet;
//  - peak memory of each MemoryTracker phase on the device ("load", "forward", "backward", "optimizer",
//    "refresh"; a phase's peak is the total in use, not its own allocations) and the host's peak RSS.
// Random ids are drawn from the ordinary (non-special) range of the vocabulary; the loss at the random init is
// about ln(vocab), which the result reports as a sanity check.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/memory.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "model/qwen3_trainable.h"
#include "train/optim/optimizer.h"
#include "train/train_step.h"

namespace nvfp4lm {

// Model FLOPs of one optimizer step (forward 2 + backward 4 FLOPs per multiply-accumulate of a weight):
//   linear    = 6 * (q, k, v, o, gate, up, down parameters of all layers) * tokens
//   lm_head   = 6 * vocab * hidden * tokens (its GEMM runs whether or not it is tied to the embedding)
//   attention = 6 * layers * batch * seq_len^2 * heads * head_dim: Q·Kᵀ and P·V are 2 * 2 * T^2 * H * D per
//               row forward at full size, causal masking halves it, the backward is twice the forward.
struct TrainFlops {
  int64_t matmul_parameters = 0;  // linear + lm_head weights
  double linear = 0;
  double lm_head = 0;
  double attention = 0;
  double total() const { return linear + lm_head + attention; }
};
TrainFlops train_step_flops(const Qwen3Config& config, int64_t batch, int64_t seq_len);

struct TrainBenchOptions {
  int64_t seq_len = 256;
  int64_t batch = 2;
  int64_t steps = 5;
  int64_t warmup_steps = 1;
  double lr = 1e-5;            // constant; small, so a few steps on random data stay finite
  double max_grad_norm = 1.0;  // as `train`'s default
  uint64_t seed = 0;           // the random token ids
};

// Checks a TrainBenchOptions (flags); Error naming the flag.
void check_train_bench_options(const TrainBenchOptions& options);

struct GemmCeiling {
  std::string name;  // "square 2048", "mlp up [512, 512] x [512, 1536]"
  int64_t m = 0, n = 0, k = 0;
  std::string method;  // "OpenBLAS cblas_sgemm (...)", "cuBLASLt BF16 GEMM, fp32 accumulation"
  double seconds = 0;  // best of several runs
  double gflop_per_s = 0;
};

// Times C[m, n] = A[m, k] · B[n, k]ᵀ (the linear layer's layout) on `device` in its compute dtype (F32 on the
// CPU, BF16 on CUDA), random operands, best of several runs after a warm-up. square_size 0 picks 2048 on the
// CPU and 8192 on CUDA.
std::vector<GemmCeiling> measure_gemm_ceilings(Device device, const Qwen3Config& config, int64_t tokens,
                                               int64_t square_size = 0);

struct TrainBenchResult {
  int64_t batch = 0, seq_len = 0, tokens_per_step = 0;
  int64_t steps = 0, warmup_steps = 0;
  int64_t vocab_size = 0;
  int64_t trained_parameters = 0;
  size_t optimizer_state_bytes = 0;
  std::vector<double> step_seconds;  // each timed step
  double mean_step_seconds = 0;
  double forward_backward_seconds = 0;  // means over the timed steps
  double optimizer_seconds = 0;         // grad norm + clip coefficient + update
  double refresh_seconds = 0;           // refresh_quantized (QAT: deq(Q(W)) of every quantized linear)
  double tokens_per_second = 0;
  double first_loss = 0, last_loss = 0;  // mean loss of the first warm-up (or timed) step and of the last step
  TrainFlops flops;                      // per step
  double achieved_gflop_per_s = 0;
  std::vector<GemmCeiling> gemms;
  double ceiling_gflop_per_s = 0;  // the best of `gemms`
  std::string ceiling_name;
  double ratio_of_ceiling = 0;  // achieved / ceiling
  Device device;
  std::vector<PhasePeak> memory_phases;  // this device's phases, in order
  size_t peak_device_bytes = 0;
  size_t peak_rss_bytes = 0;
};

// Runs the steps (see above) with `optimizer` over model.parameters(). The peak memory is read at the end, so
// measure the GEMM ceilings afterwards (their operands would count) and attach them with set_gemm_ceilings.
TrainBenchResult run_train_bench(Qwen3Trainable& model, Optimizer& optimizer, const TrainBenchOptions& options);
void set_gemm_ceilings(TrainBenchResult& result, std::vector<GemmCeiling> gemms);

nlohmann::json train_bench_json(const TrainBenchResult& result);
std::string train_bench_table(const TrainBenchResult& result);

}  // namespace nvfp4lm
