// CUDA kernel benchmarks (Google Benchmark) for Qwen3-4B shapes, each next to its ceiling measured in the same run:
//  - attention forward / backward, causal, B=2, T=2048, 32 q / 8 kv heads, head_dim 128: TFLOP/s (causal FLOPs:
//    forward 2 matmuls, backward 5, over the lower triangle);
//  - decode attention, one token against a 4096-token KV cache (B=1): time and GB/s of K / V read;
//  - NVFP4 W4A16 linear (fused kernel) for [9728 x 2560] (gate / up), [2560 x 9728] (down) and [151936 x 2560]
//    (a quantized lm_head), N = 1, 4, 8 rows of x: GB/s of packed weight + x + y, against BM_CudaCopy, a
//    device-to-device copy (GB/s = read + write);
//  - NVFP4 W4A4 GEMM on Blackwell SM 12.x's FP4 tensor cores ("cuda/nvfp4-mma-fp4") for 4096 tokens x the same
//    weights: TFLOP/s, against the BF16 GEMM of the same shapes (cuBLASLt) on the same card, and the whole W4A4 linear
//    as training runs it (the activations quantized first). Where the GPU has no native W4A4 it says why.
// GPU time from CUDA events around kLaunches launches (manual time, per launch). Without a GPU every benchmark
// reports "no usable GPU". Run: bench_cuda_kernels --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <string>

#include "core/rng.h"
#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/gemm.h"
#include "ops/nvfp4_linear.h"
#include "ops/nvfp4_w4a4_linear.h"
#include "quant/nvfp4.h"

#if NVFP4LM_HAS_CUDA
#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#endif

namespace nvfp4lm {
namespace {

#if NVFP4LM_HAS_CUDA
constexpr int kLaunches = 10;
const Device kGpu = Device::cuda(0);

bool skip_without_gpu(benchmark::State& state) {
  if (cuda::device_count() > 0) return false;
  state.SkipWithError("no usable GPU");
  return true;
}

// Seconds per launch of `op`, from CUDA events on the library's stream.
double time_launches(const std::function<void()>& op) {
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

void run_timed(benchmark::State& state, const std::function<void()>& op) {
  op();  // warm-up: kernel attributes, allocator cache
  cuda::synchronize();
  for (auto _ : state) state.SetIterationTime(time_launches(op));
}

// Random BF16 tensor on the GPU (values N(0, scale^2)).
Tensor random_bf16(const Shape& shape, uint64_t seed, float scale = 1.f) {
  Tensor f = Tensor::empty(shape, DType::F32);
  Rng rng(seed);
  float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) p[i] = scale * (2.f * rng.uniform() - 1.f) * 1.7320508f;
  Tensor b = Tensor::empty(shape, DType::BF16);
  convert_cpu(f, b);
  return b.to(kGpu);
}

void set_rate(benchmark::State& state, const char* name, double per_launch) {
  state.counters[name] = benchmark::Counter(per_launch, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- ceiling: device-to-device copy ------------------------------------------------------------------------

void BM_CudaCopy(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t bytes = int64_t{256} << 20;
  Tensor source = Tensor::zeros({bytes}, DType::U8, kGpu), target = Tensor::empty({bytes}, DType::U8, kGpu);
  run_timed(state, [&] {
    NVFP4LM_CUDA_CHECK(cudaMemcpyAsync(target.raw(), source.raw(), static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                       cuda::stream()));
  });
  set_rate(state, "GB/s", 2.0 * static_cast<double>(bytes) * 1e-9);
}
BENCHMARK(BM_CudaCopy)->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---- attention -----------------------------------------------------------------------------------------------

constexpr int64_t kBatch = 2, kSeq = 2048, kQHeads = 32, kKvHeads = 8, kDim = 128;

double causal_matmul_flops() {  // one T x T x D matmul over the causal triangle, all heads
  return 2.0 * kBatch * kQHeads * static_cast<double>(kSeq) * (kSeq + 1) / 2.0 * kDim;
}

struct AttentionInputs {
  Tensor qkv = random_bf16({kBatch, kSeq, kQHeads + 2 * kKvHeads, kDim}, 1);
  Tensor q = qkv.narrow(2, 0, kQHeads), k = qkv.narrow(2, kQHeads, kKvHeads),
         v = qkv.narrow(2, kQHeads + kKvHeads, kKvHeads);
  Tensor out = Tensor::empty({kBatch, kSeq, kQHeads, kDim}, DType::BF16, kGpu);
  Tensor lse = Tensor::empty({kBatch, kQHeads, kSeq}, DType::F32, kGpu);
  AttentionOptions options{0.08838834764f};  // 1 / sqrt(128)
};

void BM_AttentionForward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  AttentionInputs in;
  run_timed(state, [&] { attention_forward(in.q, in.k, in.v, in.out, in.options, &in.lse); });
  set_rate(state, "TFLOP/s", 2.0 * causal_matmul_flops() * 1e-12);
}
BENCHMARK(BM_AttentionForward)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_AttentionBackward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  AttentionInputs in;
  attention_forward(in.q, in.k, in.v, in.out, in.options, &in.lse);
  Tensor dout = random_bf16({kBatch, kSeq, kQHeads, kDim}, 2);
  Tensor grads = Tensor::empty({kBatch, kSeq, kQHeads + 2 * kKvHeads, kDim}, DType::BF16, kGpu);
  Tensor dq = grads.narrow(2, 0, kQHeads), dk = grads.narrow(2, kQHeads, kKvHeads),
         dv = grads.narrow(2, kQHeads + kKvHeads, kKvHeads);
  run_timed(state, [&] { attention_backward(dout, in.q, in.k, in.v, in.out, in.lse, in.options, dq, dk, dv); });
  set_rate(state, "TFLOP/s", 5.0 * causal_matmul_flops() * 1e-12);
}
BENCHMARK(BM_AttentionBackward)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Arg: context length (KV cache tokens).
void BM_DecodeAttention(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t context = state.range(0);
  Tensor q = random_bf16({1, 1, kQHeads, kDim}, 3);
  Tensor k_cache = random_bf16({1, context, kKvHeads, kDim}, 4), v_cache = random_bf16({1, context, kKvHeads, kDim}, 5);
  Tensor out = Tensor::empty({1, 1, kQHeads, kDim}, DType::BF16, kGpu);
  AttentionOptions options{0.08838834764f, context - 1};
  run_timed(state, [&] { attention_forward(q, k_cache, v_cache, out, options); });
  set_rate(state, "GB/s", 2.0 * static_cast<double>(context * kKvHeads * kDim * 2) * 1e-9);
}
BENCHMARK(BM_DecodeAttention)->Arg(4096)->Arg(32768)->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---- NVFP4 W4A16 linear --------------------------------------------------------------------------------------

// Args: out features, in features, rows of x.
void BM_Nvfp4Gemv(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t out = state.range(0), in = state.range(1), n = state.range(2);
  Nvfp4Tensor w;
  w.rows = out;
  w.cols = in;
  w.tensor_scale = 1e-3f;
  {
    Tensor codes = Tensor::empty({out, in / 2}, DType::E2M1x2), scales = Tensor::empty({out, in / 16}, DType::E4M3);
    Rng rng(6);
    auto* c = static_cast<uint8_t*>(codes.raw());
    auto* s = static_cast<uint8_t*>(scales.raw());
    for (int64_t i = 0; i < codes.numel(); ++i) c[i] = static_cast<uint8_t>(rng.next_u64());
    for (int64_t i = 0; i < scales.numel(); ++i) s[i] = static_cast<uint8_t>(0x30 + rng.below(0x20));
    w.codes = codes.to(kGpu);
    w.block_scales = scales.to(kGpu);
  }
  Tensor x = random_bf16({n, in}, 7);
  Tensor y = Tensor::empty({n, out}, DType::BF16, kGpu);
  Tensor scratch = Tensor::empty({in}, DType::BF16, kGpu);  // the fused path needs none
  run_timed(state, [&] { nvfp4_linear_forward(x, w, y, scratch); });
  const double bytes = static_cast<double>(w.codes.nbytes() + w.block_scales.nbytes() + x.nbytes() + y.nbytes());
  set_rate(state, "GB/s", bytes * 1e-9);
}
BENCHMARK(BM_Nvfp4Gemv)
    ->ArgNames({"out", "in", "N"})
    ->Args({9728, 2560, 1})
    ->Args({2560, 9728, 1})
    ->Args({151936, 2560, 1})
    ->Args({9728, 2560, 4})
    ->Args({2560, 9728, 8})
    ->Args({151936, 2560, 8})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// ---- W4A4 GEMM (Blackwell SM 12.x) against BF16 ------------------------------------------------------------

// Args: out features, in features, tokens. 0: the GEMM alone on quantized operands; 1: quantize x, then the GEMM.
void BM_Nvfp4W4a4Gemm(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  std::string why_not;
  if (!nvfp4_w4a4_native(kGpu, &why_not)) {
    state.SkipWithError(("no native W4A4: " + why_not).c_str());
    return;
  }
  const int64_t out = state.range(0), in = state.range(1), n = state.range(2);
  const bool quantize_x = state.range(3) != 0;
  const Tensor x = random_bf16({n, in}, 8);
  const Nvfp4Tensor w = quantize_nvfp4(random_bf16({out, in}, 9, 0.02f), {}, "w");
  Nvfp4Tensor xq = quantize_nvfp4(x, {}, "x");
  Tensor y = Tensor::empty({n, out}, DType::BF16, kGpu);
  run_timed(state, [&] {
    if (quantize_x) xq = quantize_nvfp4(x, {}, "x");
    nvfp4_w4a4_linear_forward(xq, w, y);
  });
  set_rate(state, "TFLOP/s", 2.0 * static_cast<double>(out) * static_cast<double>(in) * static_cast<double>(n) * 1e-12);
}
BENCHMARK(BM_Nvfp4W4a4Gemm)
    ->ArgNames({"out", "in", "N", "quantize_x"})
    ->Args({9728, 2560, 4096, 0})
    ->Args({2560, 9728, 4096, 0})
    ->Args({9728, 2560, 4096, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The same products in BF16 (cuBLASLt): the ceiling the dequantize + BF16 GEMM path has on this card.
void BM_Bf16Gemm(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t out = state.range(0), in = state.range(1), n = state.range(2);
  const Tensor x = random_bf16({n, in}, 10), w = random_bf16({out, in}, 11, 0.02f);
  Tensor y = Tensor::empty({n, out}, DType::BF16, kGpu);
  run_timed(state, [&] { linear_forward(x, w, y); });
  set_rate(state, "TFLOP/s", 2.0 * static_cast<double>(out) * static_cast<double>(in) * static_cast<double>(n) * 1e-12);
}
BENCHMARK(BM_Bf16Gemm)
    ->ArgNames({"out", "in", "N"})
    ->Args({9728, 2560, 4096})
    ->Args({2560, 9728, 4096})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
#endif

}  // namespace
}  // namespace nvfp4lm

BENCHMARK_MAIN();
