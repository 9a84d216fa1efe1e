// CUDA op benchmarks (Google Benchmark) on Qwen3-4B shapes (hidden 2560, q 4096, kv 1024, intermediate 9728,
// vocabulary 151936), each next to its ceiling:
//  - GEMM (cuBLASLt, BF16, fp32 accumulation) for every projection at N = 8192 tokens (a training step) and N = 1
//    (decode): forward y = x·Wᵀ, backward dx = dy·W, and dW (F32) += dyᵀ·x. TFLOP/s; the ceiling is the tensor
//    core peak (H100 SXM: 989 dense BF16 TFLOP/s), printed as the fraction `of_peak` when the device is an H100.
//  - RMSNorm forward / backward (hidden rows and per-head QK-norm rows) and SwiGLU forward / backward: GB/s of
//    bytes read + written, against BM_CudaOpsCopy (a device-to-device copy, read + write) in the same run.
//  - the fused lm_head + cross-entropy (forward + backward, N = 8192): time, and TFLOP/s of its three GEMMs.
// GPU time from CUDA events around kLaunches launches (manual time, per launch). Without a GPU every benchmark
// reports "no usable GPU". Run: bench_cuda_ops --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "ops/cross_entropy.h"
#include "ops/gemm.h"
#include "ops/rmsnorm.h"
#include "ops/swiglu.h"

#if NVFP4LM_HAS_CUDA
#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#endif

namespace nvfp4lm {
namespace {

#if NVFP4LM_HAS_CUDA
constexpr int kLaunches = 10;
constexpr int64_t kTokens = 8192;
constexpr double kH100BF16PeakFlops = 989e12;
const Device kGpu = Device::cuda(0);

bool skip_without_gpu(benchmark::State& state) {
  if (cuda::device_count() > 0) return false;
  state.SkipWithError("no usable GPU");
  return true;
}

bool is_h100() { return cuda::device_info(0).name.find("H100") != std::string::npos; }

// Seconds per launch of `op`, from CUDA events on the library's stream.
double seconds_per_launch(const std::function<void()>& op) {
  cudaEvent_t start, stop;
  NVFP4LM_CUDA_CHECK(cudaEventCreate(&start));
  NVFP4LM_CUDA_CHECK(cudaEventCreate(&stop));
  NVFP4LM_CUDA_CHECK(cudaEventRecord(start, cuda::stream()));
  for (int i = 0; i < kLaunches; ++i) op();
  NVFP4LM_CUDA_CHECK(cudaEventRecord(stop, cuda::stream()));
  NVFP4LM_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.f;
  NVFP4LM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  NVFP4LM_CUDA_CHECK(cudaEventDestroy(start));
  NVFP4LM_CUDA_CHECK(cudaEventDestroy(stop));
  return static_cast<double>(ms) * 1e-3 / kLaunches;
}

// Times `op` once per benchmark iteration; returns the mean seconds per launch.
double run_timed(benchmark::State& state, const std::function<void()>& op) {
  op();  // warm-up: cuBLASLt plans, kernel attributes, the allocator cache
  cuda::synchronize();
  double total = 0;
  int64_t iterations = 0;
  for (auto _ : state) {
    const double seconds = seconds_per_launch(op);
    state.SetIterationTime(seconds);
    total += seconds;
    ++iterations;
  }
  return iterations > 0 ? total / static_cast<double>(iterations) : 0.0;
}

// Random tensor on the GPU, values U(-scale, scale) (N(0, 1)-sized for scale sqrt(3)).
Tensor random_device(const Shape& shape, DType dtype, uint64_t seed, float scale = 1.7320508f) {
  Tensor f = Tensor::empty(shape, DType::F32);
  Rng rng(seed);
  float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) p[i] = scale * (2.f * rng.uniform() - 1.f);
  if (dtype == DType::F32) return f.to(kGpu);
  Tensor narrow = Tensor::empty(shape, dtype);
  convert_cpu(f, narrow);
  return narrow.to(kGpu);
}

void set_rate(benchmark::State& state, const char* name, double per_launch) {
  state.counters[name] = benchmark::Counter(per_launch, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- ceiling: device-to-device copy ------------------------------------------------------------------------

void BM_CudaOpsCopy(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t elements = int64_t{128} << 20;  // 256 MiB of BF16
  Tensor source = Tensor::zeros({elements}, DType::BF16, kGpu), target = Tensor::empty({elements}, DType::BF16, kGpu);
  run_timed(state, [&] {
    NVFP4LM_CUDA_CHECK(
        cudaMemcpyAsync(target.raw(), source.raw(), source.nbytes(), cudaMemcpyDeviceToDevice, cuda::stream()));
  });
  set_rate(state, "bytes/s", 2.0 * static_cast<double>(source.nbytes()));
}
BENCHMARK(BM_CudaOpsCopy)->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---- GEMM -------------------------------------------------------------------------------------------------

enum GemmKind : int64_t { kForward = 0, kBackwardInput = 1, kBackwardWeight = 2 };

// Args: out_features, in_features, rows, kind.
void BM_CudaGemm(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t out = state.range(0), in = state.range(1), rows = state.range(2);
  const auto kind = static_cast<GemmKind>(state.range(3));
  const Tensor w = random_device({out, in}, DType::BF16, 1, 0.02f);
  const Tensor x = random_device({rows, in}, DType::BF16, 2);
  const Tensor dy = random_device({rows, out}, DType::BF16, 3, 0.01f);
  Tensor y = Tensor::empty({rows, out}, DType::BF16, kGpu), dx = Tensor::empty({rows, in}, DType::BF16, kGpu);
  Tensor dw = kind == kBackwardWeight ? Tensor::zeros({out, in}, DType::F32, kGpu) : Tensor();
  const double seconds = run_timed(state, [&] {
    if (kind == kForward) linear_forward(x, w, y);
    if (kind == kBackwardInput) linear_backward_input(dy, w, dx);
    if (kind == kBackwardWeight) linear_backward_weight(dy, x, dw);
  });
  const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(out) * static_cast<double>(in);
  set_rate(state, "FLOP/s", flops);
  if (is_h100() && seconds > 0) state.counters["of_peak"] = flops / seconds / kH100BF16PeakFlops;
  state.SetLabel(kind == kForward ? "y = x Wt" : (kind == kBackwardInput ? "dx = dy W" : "dW += dyT x (F32)"));
}

void gemm_shapes(benchmark::internal::Benchmark* b) {
  const int64_t shapes[][2] = {{4096, 2560}, {1024, 2560}, {2560, 4096}, {9728, 2560}, {2560, 9728}, {151936, 2560}};
  for (const auto& shape : shapes) {
    for (int64_t kind : {kForward, kBackwardInput, kBackwardWeight}) b->Args({shape[0], shape[1], kTokens, kind});
    b->Args({shape[0], shape[1], 1, kForward});  // decode
  }
}
BENCHMARK(BM_CudaGemm)->Apply(gemm_shapes)->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---- RMSNorm / SwiGLU (memory bound) -----------------------------------------------------------------------

// Args: rows, dim (8192 x 2560 hidden rows; 8192 x 32 heads of 128 for QK-norm).
void BM_CudaRmsNormForward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t rows = state.range(0), dim = state.range(1);
  const Tensor x = random_device({rows, dim}, DType::BF16, 4), w = random_device({dim}, DType::F32, 5);
  Tensor y = Tensor::empty({rows, dim}, DType::BF16, kGpu), rstd = Tensor::empty({rows}, DType::F32, kGpu);
  run_timed(state, [&] { rmsnorm_forward(x, w, 1e-6f, y, &rstd); });
  set_rate(state, "bytes/s", static_cast<double>(2 * x.nbytes() + rstd.nbytes()));
}
BENCHMARK(BM_CudaRmsNormForward)
    ->Args({kTokens, 2560})
    ->Args({kTokens * 32, 128})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_CudaRmsNormBackward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t rows = state.range(0), dim = state.range(1);
  const Tensor x = random_device({rows, dim}, DType::BF16, 6), w = random_device({dim}, DType::F32, 7);
  const Tensor dy = random_device({rows, dim}, DType::BF16, 8);
  Tensor y = Tensor::empty({rows, dim}, DType::BF16, kGpu), rstd = Tensor::empty({rows}, DType::F32, kGpu);
  rmsnorm_forward(x, w, 1e-6f, y, &rstd);
  Tensor dx = Tensor::empty({rows, dim}, DType::BF16, kGpu), dw = Tensor::zeros({dim}, DType::F32, kGpu);
  run_timed(state, [&] { rmsnorm_backward(dy, x, w, rstd, dx, dw); });
  set_rate(state, "bytes/s", static_cast<double>(3 * x.nbytes() + rstd.nbytes()));
}
BENCHMARK(BM_CudaRmsNormBackward)
    ->Args({kTokens, 2560})
    ->Args({kTokens * 32, 128})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// gate / up are the halves of a fused [N, 2 * 9728] projection, as the model lays them out.
void BM_CudaSwiglu(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const bool backward = state.range(0) != 0;
  const int64_t rows = kTokens, width = 9728;
  const Tensor fused = random_device({rows, 2 * width}, DType::BF16, 9);
  const Tensor gate = fused.narrow(1, 0, width), up = fused.narrow(1, width, width);
  const Tensor dout = random_device({rows, width}, DType::BF16, 10);
  Tensor out = Tensor::empty({rows, width}, DType::BF16, kGpu);
  Tensor dfused = Tensor::empty({rows, 2 * width}, DType::BF16, kGpu);
  Tensor dgate = dfused.narrow(1, 0, width), dup = dfused.narrow(1, width, width);
  run_timed(state, [&] {
    if (backward) {
      swiglu_backward(dout, gate, up, dgate, dup);
    } else {
      swiglu_forward(gate, up, out);
    }
  });
  set_rate(state, "bytes/s", static_cast<double>((backward ? 5 : 3) * out.nbytes()));
  state.SetLabel(backward ? "backward" : "forward");
}
BENCHMARK(BM_CudaSwiglu)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---- fused lm_head + cross-entropy ------------------------------------------------------------------------

// Arg: 1 = with both gradients, 0 = loss only.
void BM_CudaCrossEntropy(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const bool grads = state.range(0) != 0;
  const int64_t rows = kTokens, hidden_dim = 2560, vocab = 151936;
  const Tensor h = random_device({rows, hidden_dim}, DType::BF16, 11);
  const Tensor w = random_device({vocab, hidden_dim}, DType::BF16, 12, 0.02f);
  std::vector<int32_t> target(static_cast<size_t>(rows));
  Rng rng(13);
  for (auto& t : target) t = static_cast<int32_t>(rng.below(vocab));
  const Tensor targets = Tensor::from_ints(target, {rows}).to(kGpu);
  Tensor dh = Tensor::empty({rows, hidden_dim}, DType::BF16, kGpu);
  Tensor dw = grads ? Tensor::zeros({vocab, hidden_dim}, DType::F32, kGpu) : Tensor();
  run_timed(state, [&] {
    lm_head_cross_entropy(h, w, targets, 1.f / static_cast<float>(rows), grads ? &dh : nullptr, grads ? &dw : nullptr);
  });
  const double gemm_flops = 2.0 * static_cast<double>(rows) * static_cast<double>(vocab) * hidden_dim;
  set_rate(state, "FLOP/s", (grads ? 3.0 : 1.0) * gemm_flops);
  state.SetLabel(grads ? "loss + dhidden + dW" : "loss only");
}
BENCHMARK(BM_CudaCrossEntropy)->Arg(1)->Arg(0)->UseManualTime()->Unit(benchmark::kMillisecond);

#else
void BM_CudaOpsUnavailable(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
BENCHMARK(BM_CudaOpsUnavailable);
#endif

}  // namespace
}  // namespace nvfp4lm

BENCHMARK_MAIN();
