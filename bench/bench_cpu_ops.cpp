// CPU op micro-benchmarks (Google Benchmark). Each family prints its throughput next to its ceiling:
//  - GEMM: raw cblas_sgemm on Qwen-like linear shapes is the ceiling (GFLOP/s); linear_forward / backward
//    must match it (the wrapper adds no copies), and dequantize_nvfp4 + linear_forward (the cpu/dequant-gemm
//    path, dequantizing each call) is reported against it.
//  - attention: GFLOP/s of the causal work (4 B Hq D T^2 / 2 forward, 2.5x that backward) vs sgemm.
//  - rmsnorm / swiglu / rope: GB/s of the bytes they must move, vs a plain memcpy of the same size.
// Outputs are allocated zeroed (touched) so no timed iteration pays first-touch page faults (~10 us per 4 KiB
// page on a VM: a 100 MiB tensor costs ~0.3 s the first time it is written).
// Run: bench_cpu_ops --benchmark_counters_tabular=true   (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS as wanted)
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/cpu_matmul.h"
#include "ops/cross_entropy.h"
#include "ops/gemm.h"
#include "ops/nvfp4_linear.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {
namespace {

Tensor random_tensor(const Shape& shape, uint64_t seed, float scale = 1.f) {
  Tensor t = Tensor::zeros(shape, DType::F32);
  Rng rng(seed);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = scale * (2.f * rng.uniform() - 1.f);
  return t;
}

void set_flops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void set_bytes(benchmark::State& state, double bytes_per_iteration) {
  state.counters["GB/s"] =
      benchmark::Counter(bytes_per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Linear shapes [N x in] x [out x in]ᵀ: args are N, out, in. 512x1536x512 is a small-model projection;
// 128 x 9728 x 2560 is Qwen3-4B's gate/up at 128 tokens; 512 x 2560 x 2560 its o_proj-like square.
void linear_shapes(benchmark::internal::Benchmark* b) {
  b->Args({512, 1536, 512})
      ->Args({128, 9728, 2560})
      ->Args({512, 2560, 2560})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

void BM_RawSgemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0)), out = static_cast<int>(state.range(1)),
            in = static_cast<int>(state.range(2));
  Tensor x = random_tensor({n, in}, 1), w = random_tensor({out, in}, 2), y = Tensor::zeros({n, out}, DType::F32);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.f, x.data<float>(), in, w.data<float>(), in, 0.f,
                y.data<float>(), out);
    benchmark::DoNotOptimize(y.data<float>());
  }
  set_flops(state, 2.0 * n * out * in);
}
BENCHMARK(BM_RawSgemm)->Apply(linear_shapes);

void BM_LinearForward(benchmark::State& state) {
  const int64_t n = state.range(0), out = state.range(1), in = state.range(2);
  Tensor x = random_tensor({n, in}, 1), w = random_tensor({out, in}, 2), y = Tensor::zeros({n, out}, DType::F32);
  for (auto _ : state) linear_forward(x, w, y);
  set_flops(state, 2.0 * n * out * in);
}
BENCHMARK(BM_LinearForward)->Apply(linear_shapes);

void BM_LinearBackwardInput(benchmark::State& state) {
  const int64_t n = state.range(0), out = state.range(1), in = state.range(2);
  Tensor dy = random_tensor({n, out}, 1), w = random_tensor({out, in}, 2), dx = Tensor::zeros({n, in}, DType::F32);
  for (auto _ : state) linear_backward_input(dy, w, dx);
  set_flops(state, 2.0 * n * out * in);
}
BENCHMARK(BM_LinearBackwardInput)->Apply(linear_shapes);

void BM_LinearBackwardWeight(benchmark::State& state) {
  const int64_t n = state.range(0), out = state.range(1), in = state.range(2);
  Tensor dy = random_tensor({n, out}, 1), x = random_tensor({n, in}, 2), dw = Tensor::zeros({out, in}, DType::F32);
  for (auto _ : state) linear_backward_weight(dy, x, dw);
  set_flops(state, 2.0 * n * out * in);
}
BENCHMARK(BM_LinearBackwardWeight)->Apply(linear_shapes);

// The cpu/dequant-gemm path at its worst: the NVFP4 weight is dequantized on every call (a model dequantizes
// once per optimizer step / once at load, so real runs sit between this and BM_LinearForward).
void BM_DequantLinearForward(benchmark::State& state) {
  const int64_t n = state.range(0), out = state.range(1), in = state.range(2);
  Tensor x = random_tensor({n, in}, 1), y = Tensor::zeros({n, out}, DType::F32);
  const Nvfp4Tensor q = quantize_nvfp4(random_tensor({out, in}, 2));
  Tensor w = Tensor::zeros({out, in}, DType::F32);
  for (auto _ : state) {
    dequantize_nvfp4(q, w);
    linear_forward(x, w, y);
  }
  set_flops(state, 2.0 * n * out * in);
}
BENCHMARK(BM_DequantLinearForward)->Apply(linear_shapes);

// The dequantization alone (quant/), to split BM_DequantLinearForward into its two parts; GB/s of F32 written.
void BM_DequantizeNvfp4(benchmark::State& state) {
  const int64_t out = state.range(1), in = state.range(2);
  const Nvfp4Tensor q = quantize_nvfp4(random_tensor({out, in}, 2));
  Tensor w = Tensor::zeros({out, in}, DType::F32);
  for (auto _ : state) dequantize_nvfp4(q, w);
  set_bytes(state, static_cast<double>(w.nbytes()));
}
BENCHMARK(BM_DequantizeNvfp4)->Apply(linear_shapes);

// A decode step's NVFP4 linear (1 row, the fused path that never materialises the weight): GB/s of packed
// weight read (codes + block scales), to compare with BM_Memcpy. Args: out, in (Qwen3-4B gate/up, down, o;
// the small preset's gate/up and q), activations (0: fp32, ops/cpu/nvfp4_dot.h; 1: int8, ops/cpu/nvfp4_int8_dot.h;
// 2: int8 on the weight as an int8-mode model holds it, interleaved where the CPU has AVX-512 VNNI + VBMI,
// ops/cpu/nvfp4_interleaved.h).
Nvfp4Tensor decode_weight(const Tensor& weight, int64_t activations) {
  const Nvfp4Tensor q = quantize_nvfp4(weight);
  return activations == 2 ? nvfp4_for_cpu_int8_decode(q) : q;
}

void BM_Nvfp4DecodeLinear(benchmark::State& state) {
  const int64_t out = state.range(0), in = state.range(1);
  const CpuMatmul matmul = state.range(2) ? CpuMatmul::Int8Activations : CpuMatmul::Fp32;
  const Nvfp4Tensor q = decode_weight(random_tensor({out, in}, 2), state.range(2));
  Tensor x = random_tensor({1, in}, 1), y = Tensor::zeros({1, out}, DType::F32);
  Tensor scratch = Tensor::zeros({in}, DType::F32);
  for (auto _ : state) nvfp4_linear_forward(x, q, y, scratch, LinearRows::Batch, matmul);
  set_bytes(state, static_cast<double>(q.nbytes() - sizeof(float)));
}
BENCHMARK(BM_Nvfp4DecodeLinear)
    ->ArgsProduct({{9728}, {2560}, {0, 1, 2}})
    ->ArgsProduct({{2560}, {9728}, {0, 1, 2}})
    ->ArgsProduct({{2560}, {2560}, {0, 1, 2}})
    ->ArgsProduct({{1536}, {512}, {0, 1, 2}})
    ->ArgsProduct({{512}, {512}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The same from memory, not cache: 24 different weights of Qwen3-4B's gate shape (336 MB, far past any L3), one
// after the other as a decode step meets its layers. Args: activations as above.
void BM_Nvfp4DecodeLinearFromMemory(benchmark::State& state) {
  const CpuMatmul matmul = state.range(0) ? CpuMatmul::Int8Activations : CpuMatmul::Fp32;
  std::vector<Nvfp4Tensor> weights;
  for (int i = 0; i < 24; ++i)
    weights.push_back(decode_weight(random_tensor({9728, 2560}, static_cast<uint64_t>(i + 2)), state.range(0)));
  Tensor x = random_tensor({1, 2560}, 1), y = Tensor::zeros({1, 9728}, DType::F32);
  Tensor scratch = Tensor::zeros({2560}, DType::F32);
  for (auto _ : state)
    for (const Nvfp4Tensor& w : weights) nvfp4_linear_forward(x, w, y, scratch, LinearRows::Batch, matmul);
  set_bytes(state, 24.0 * static_cast<double>(weights[0].nbytes() - sizeof(float)));
}
BENCHMARK(BM_Nvfp4DecodeLinearFromMemory)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// A decode step's BF16 lm_head (the tied embedding kept in BF16, ops/cross_entropy.h's lm_head_logits): GB/s of
// weight read. Args: vocabulary, hidden (Qwen3-4B), CpuMatmul (0 fp32, 1 bf16, 2 int8).
void BM_Bf16LmHeadDecode(benchmark::State& state) {
  const int64_t vocab = state.range(0), hidden = state.range(1);
  const auto matmul = static_cast<CpuMatmul>(state.range(2));
  Tensor table = Tensor::empty({vocab, hidden}, DType::BF16);
  convert_cpu(random_tensor({vocab, hidden}, 2), table);
  Tensor x = random_tensor({1, hidden}, 1), logits = Tensor::zeros({1, vocab}, DType::F32);
  for (auto _ : state) lm_head_logits(x, table, logits, LinearRows::Batch, matmul);
  set_bytes(state, static_cast<double>(table.nbytes()));
}
BENCHMARK(BM_Bf16LmHeadDecode)
    ->ArgsProduct({{151936}, {2560}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Attention, Qwen3-4B heads (32 q, 8 kv, head_dim 128); args: batch, seq_len.
struct AttentionInputs {
  Tensor q, k, v, out, lse;
  AttentionInputs(int64_t batch, int64_t seq)
      : q(random_tensor({batch, seq, 32, 128}, 3)),
        k(random_tensor({batch, seq, 8, 128}, 4)),
        v(random_tensor({batch, seq, 8, 128}, 5)),
        out(Tensor::zeros({batch, seq, 32, 128}, DType::F32)),
        lse(Tensor::zeros({batch, 32, seq}, DType::F32)) {}
};

double attention_forward_flops(int64_t batch, int64_t seq) {
  return 4.0 * batch * 32 * 128 * static_cast<double>(seq) * static_cast<double>(seq + 1) / 2;
}

void BM_AttentionForward(benchmark::State& state) {
  const int64_t batch = state.range(0), seq = state.range(1);
  AttentionInputs in(batch, seq);
  const AttentionOptions options{1.f / std::sqrt(128.f)};
  for (auto _ : state) attention_forward(in.q, in.k, in.v, in.out, options, &in.lse);
  set_flops(state, attention_forward_flops(batch, seq));
}
BENCHMARK(BM_AttentionForward)->Args({1, 512})->Args({1, 2048})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_AttentionBackward(benchmark::State& state) {
  const int64_t batch = state.range(0), seq = state.range(1);
  AttentionInputs in(batch, seq);
  const AttentionOptions options{1.f / std::sqrt(128.f)};
  attention_forward(in.q, in.k, in.v, in.out, options, &in.lse);
  Tensor dout = random_tensor(in.q.shape(), 6);
  Tensor dq = Tensor::zeros(in.q.shape(), DType::F32), dk = Tensor::zeros(in.k.shape(), DType::F32);
  Tensor dv = Tensor::zeros(in.v.shape(), DType::F32);
  for (auto _ : state) attention_backward(dout, in.q, in.k, in.v, in.out, in.lse, options, dq, dk, dv);
  set_flops(state, 2.5 * attention_forward_flops(batch, seq));  // S, dP recomputed + dQ, dK, dV: 5 GEMMs vs 2
}
BENCHMARK(BM_AttentionBackward)->Args({1, 512})->Unit(benchmark::kMillisecond)->UseRealTime();

// One token decoding against a KV cache of `seq` positions (batch 1).
void BM_AttentionDecode(benchmark::State& state) {
  const int64_t seq = state.range(0);
  AttentionInputs in(1, seq);
  Tensor out = Tensor::zeros({1, 1, 32, 128}, DType::F32);
  const AttentionOptions options{1.f / std::sqrt(128.f), seq - 1};
  Tensor q = in.q.narrow(1, seq - 1, 1);
  for (auto _ : state) attention_forward(q, in.k, in.v, out, options);
  set_bytes(state, 2.0 * seq * 8 * 128 * 4);  // reads the K and V cache once
}
BENCHMARK(BM_AttentionDecode)->Arg(4096)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Elementwise-ish ops on [tokens, hidden]: memcpy of the same bytes is the ceiling.
void BM_Memcpy(benchmark::State& state) {
  const int64_t rows = state.range(0), dim = state.range(1);
  Tensor a = random_tensor({rows, dim}, 7), b = Tensor::zeros({rows, dim}, DType::F32);
  for (auto _ : state) {
    std::memcpy(b.raw(), a.raw(), a.nbytes());
    benchmark::DoNotOptimize(b.raw());
  }
  set_bytes(state, 2.0 * static_cast<double>(a.nbytes()));
}
BENCHMARK(BM_Memcpy)->Args({4096, 2560})->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_RmsNormForward(benchmark::State& state) {
  const int64_t rows = state.range(0), dim = state.range(1);
  Tensor x = random_tensor({rows, dim}, 8), w = random_tensor({dim}, 9), y = Tensor::zeros({rows, dim}, DType::F32);
  Tensor rstd = Tensor::zeros({rows}, DType::F32);
  for (auto _ : state) rmsnorm_forward(x, w, 1e-6f, y, &rstd);
  set_bytes(state, 2.0 * static_cast<double>(x.nbytes()));
}
BENCHMARK(BM_RmsNormForward)->Args({4096, 2560})->Args({4096 * 32, 128})->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_RmsNormBackward(benchmark::State& state) {
  const int64_t rows = state.range(0), dim = state.range(1);
  Tensor x = random_tensor({rows, dim}, 8), w = random_tensor({dim}, 9), y = Tensor::zeros({rows, dim}, DType::F32);
  Tensor rstd = Tensor::zeros({rows}, DType::F32), dy = random_tensor({rows, dim}, 10);
  Tensor dx = Tensor::zeros({rows, dim}, DType::F32), dw = Tensor::zeros({dim}, DType::F32);
  rmsnorm_forward(x, w, 1e-6f, y, &rstd);
  for (auto _ : state) rmsnorm_backward(dy, x, w, rstd, dx, dw);
  set_bytes(state, 3.0 * static_cast<double>(x.nbytes()));
}
BENCHMARK(BM_RmsNormBackward)->Args({4096, 2560})->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_SwiGluForward(benchmark::State& state) {
  const int64_t rows = state.range(0), dim = state.range(1);
  Tensor fused = random_tensor({rows, 2 * dim}, 11, 4.f), out = Tensor::zeros({rows, dim}, DType::F32);
  Tensor gate = fused.narrow(1, 0, dim), up = fused.narrow(1, dim, dim);
  for (auto _ : state) swiglu_forward(gate, up, out);
  set_bytes(state, 3.0 * static_cast<double>(out.nbytes()));
}
BENCHMARK(BM_SwiGluForward)->Args({1024, 9728})->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_RopeForward(benchmark::State& state) {
  const int64_t tokens = state.range(0);
  Tensor x = random_tensor({tokens, 32, 128}, 12);
  std::vector<int32_t> pos(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  Tensor positions = Tensor::from_ints(pos, {tokens});
  const RopeTable table(128, 5e6f, tokens);
  for (auto _ : state) rope_forward(x, positions, table);
  set_bytes(state, 2.0 * static_cast<double>(x.nbytes()));
}
BENCHMARK(BM_RopeForward)->Arg(4096)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Fused lm_head + CE with gradients on 128 target tokens, hidden 2560, a 32k vocabulary (Qwen's 152k scales
// linearly): 3 GEMMs of 2 N V H flops each; sgemm is the ceiling.
void BM_CrossEntropyWithGrads(benchmark::State& state) {
  const int64_t tokens = 128, hidden = 2560, vocab = state.range(0);
  Tensor h = random_tensor({tokens, hidden}, 13), w = random_tensor({vocab, hidden}, 14, 0.05f);
  std::vector<int32_t> tgt(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) tgt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % vocab);
  Tensor targets = Tensor::from_ints(tgt, {tokens});
  Tensor dh = Tensor::zeros({tokens, hidden}, DType::F32), dw = Tensor::zeros({vocab, hidden}, DType::F32);
  for (auto _ : state) {
    CrossEntropyResult r = lm_head_cross_entropy(h, w, targets, 1.f / tokens, &dh, &dw);
    benchmark::DoNotOptimize(r.loss_sum);
  }
  set_flops(state, 3 * 2.0 * tokens * vocab * hidden);
}
BENCHMARK(BM_CrossEntropyWithGrads)->Arg(32768)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace nvfp4lm

BENCHMARK_MAIN();
