// NVFP4 codec throughput (Google Benchmark) on a 2560 x 9728 matrix (Qwen3-4B's gate/up projection, transposed
// like down_proj), in GB/s of bytes read + written, next to the ceiling: a memcpy that reads and writes the
// same number of bytes as the larger side of the op (the F32/BF16 matrix), in the same run.
//  - quantize: reads the matrix twice (amax pass, then blocks) and writes 0.5625 bytes per element;
//  - dequantize: reads 0.5625 bytes per element, writes the matrix;
//  - fake quantize (once per optimizer step in QAT): reads the matrix twice, writes it once.
// With CUDA built and a GPU present, the same for the CUDA twin (10 launches per timed iteration, then one
// sync; quantize includes its amax read-back sync), against a device-to-device copy.
// Run: bench_nvfp4 --benchmark_counters_tabular=true   (OMP_NUM_THREADS as wanted)
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "quant/nvfp4.h"

#if NVFP4LM_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

namespace nvfp4lm {
namespace {

constexpr int64_t kRows = 2560, kCols = 9728, kElements = kRows * kCols;
constexpr double kQuantizedBytesPerElement = 0.5 + 1.0 / 16;

Tensor random_matrix(DType dtype, Device device = Device::cpu()) {
  Tensor t = Tensor::empty({kRows, kCols}, DType::F32);
  Rng rng(1);
  float* p = t.data<float>();
  for (int64_t i = 0; i < kElements; ++i) p[i] = 0.02f * (2.0f * rng.uniform() - 1.0f);
  if (dtype != DType::F32) {
    Tensor converted = Tensor::empty({kRows, kCols}, dtype);
    convert_cpu(t, converted);
    t = converted;
  }
  return t.to(device);
}

DType dtype_arg(const benchmark::State& state) { return state.range(0) == 32 ? DType::F32 : DType::BF16; }

void set_bytes(benchmark::State& state, double bytes_per_iteration) {
  state.counters["GB/s"] =
      benchmark::Counter(bytes_per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

Nvfp4QuantOptions options_arg(const benchmark::State& state) {
  Nvfp4QuantOptions options;
  options.block = state.range(1) == 2 ? Nvfp4Block::Tile16x16 : Nvfp4Block::Row1x16;
  options.rounding = state.range(2) ? Rounding::Stochastic : Rounding::NearestEven;
  options.seed = 7;
  return options;
}

// Args: element bits of the matrix (32 = F32, 16 = BF16).
void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(kElements) * (state.range(0) == 32 ? 4 : 2);
  std::vector<char> source(bytes, 1), target(bytes);
  for (auto _ : state) {
    std::memcpy(target.data(), source.data(), bytes);
    benchmark::DoNotOptimize(target.data());
  }
  set_bytes(state, 2.0 * static_cast<double>(bytes));
}
BENCHMARK(BM_Memcpy)->Arg(32)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

// Args: element bits, block (1 = 1x16, 2 = 16x16), stochastic (0/1).
void BM_Quantize(benchmark::State& state) {
  const DType dtype = dtype_arg(state);
  Tensor x = random_matrix(dtype);
  const Nvfp4QuantOptions options = options_arg(state);
  for (auto _ : state) benchmark::DoNotOptimize(quantize_nvfp4(x, options).codes.raw());
  set_bytes(state, kElements * (2.0 * static_cast<double>(dtype_bytes(dtype)) + kQuantizedBytesPerElement));
}
BENCHMARK(BM_Quantize)
    ->Args({32, 1, 0})
    ->Args({16, 1, 0})
    ->Args({32, 2, 0})
    ->Args({32, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: element bits of the output.
void BM_Dequantize(benchmark::State& state) {
  const DType dtype = dtype_arg(state);
  Nvfp4Tensor q = quantize_nvfp4(random_matrix(DType::F32));
  Tensor out = Tensor::empty({kRows, kCols}, dtype);
  for (auto _ : state) {
    dequantize_nvfp4(q, out);
    benchmark::DoNotOptimize(out.raw());
  }
  set_bytes(state, kElements * (kQuantizedBytesPerElement + static_cast<double>(dtype_bytes(dtype))));
}
BENCHMARK(BM_Dequantize)->Arg(32)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

// Args: element bits of input and output, block, stochastic.
void BM_FakeQuantize(benchmark::State& state) {
  const DType dtype = dtype_arg(state);
  Tensor x = random_matrix(dtype);
  Tensor out = Tensor::empty({kRows, kCols}, dtype);
  const Nvfp4QuantOptions options = options_arg(state);
  for (auto _ : state) {
    fake_quantize_nvfp4(x, out, options);
    benchmark::DoNotOptimize(out.raw());
  }
  set_bytes(state, kElements * 3.0 * static_cast<double>(dtype_bytes(dtype)));
}
BENCHMARK(BM_FakeQuantize)->Args({32, 1, 0})->Args({16, 1, 0})->Unit(benchmark::kMillisecond)->UseRealTime();

#if NVFP4LM_HAS_CUDA
constexpr int kLaunches = 10;

bool skip_without_gpu(benchmark::State& state) {
  if (cuda::device_count() > 0) return false;
  state.SkipWithError("no usable GPU");
  return true;
}

void BM_CudaCopy(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const DType dtype = dtype_arg(state);
  Tensor source = random_matrix(dtype, Device::cuda(0));
  Tensor target = Tensor::empty({kRows, kCols}, dtype, Device::cuda(0));
  for (auto _ : state)
    for (int i = 0; i < kLaunches; ++i) target.copy_from(source);  // cudaMemcpyAsync + stream sync
  set_bytes(state, kLaunches * 2.0 * static_cast<double>(source.nbytes()));
}
BENCHMARK(BM_CudaCopy)->Arg(32)->Arg(16)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_CudaQuantize(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const DType dtype = dtype_arg(state);
  Tensor x = random_matrix(dtype, Device::cuda(0));
  const Nvfp4QuantOptions options = options_arg(state);
  for (auto _ : state) {
    for (int i = 0; i < kLaunches; ++i) benchmark::DoNotOptimize(quantize_nvfp4(x, options).codes.raw());
    cuda::synchronize();
  }
  set_bytes(state, kLaunches * kElements * (2.0 * static_cast<double>(dtype_bytes(dtype)) + kQuantizedBytesPerElement));
}
BENCHMARK(BM_CudaQuantize)
    ->Args({32, 1, 0})
    ->Args({16, 1, 0})
    ->Args({16, 2, 0})
    ->Args({16, 1, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_CudaDequantize(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const DType dtype = dtype_arg(state);
  Nvfp4Tensor q = quantize_nvfp4(random_matrix(DType::F32, Device::cuda(0)));
  Tensor out = Tensor::empty({kRows, kCols}, dtype, Device::cuda(0));
  for (auto _ : state) {
    for (int i = 0; i < kLaunches; ++i) dequantize_nvfp4(q, out);
    cuda::synchronize();
  }
  set_bytes(state, kLaunches * kElements * (kQuantizedBytesPerElement + static_cast<double>(dtype_bytes(dtype))));
}
BENCHMARK(BM_CudaDequantize)->Arg(16)->Arg(32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_CudaFakeQuantize(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const DType dtype = dtype_arg(state);
  Tensor x = random_matrix(dtype, Device::cuda(0));
  Tensor out = Tensor::empty({kRows, kCols}, dtype, Device::cuda(0));
  const Nvfp4QuantOptions options = options_arg(state);
  for (auto _ : state) {
    for (int i = 0; i < kLaunches; ++i) fake_quantize_nvfp4(x, out, options);
    cuda::synchronize();
  }
  set_bytes(state, kLaunches * kElements * 3.0 * static_cast<double>(dtype_bytes(dtype)));
}
BENCHMARK(BM_CudaFakeQuantize)->Args({32, 1, 0})->Args({16, 1, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
#endif

}  // namespace
}  // namespace nvfp4lm

BENCHMARK_MAIN();
