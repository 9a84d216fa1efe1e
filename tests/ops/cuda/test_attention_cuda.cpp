// CUDA attention (ops/cuda/attention_*.cu) vs the fp32 CPU reference on the same BF16-rounded inputs:
// forward (out, lse) through the flash kernel and the split-key decode kernel, backward (dq, dk, dv), with GQA
// (4/2, 32/8), head_dim 16 / 64 / 128, packed segments (contiguous and repeated ids), query offsets over a KV
// cache whose unused tail is NaN (never read), and q / k / v (and their gradients) as views of a fused buffer.
// Outputs are poisoned with NaN first, so every element must be written. One summary line per case.
// Skipped without a GPU.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/emulated_arch.h"
#include "common/test_util.h"
#include "core/rng.h"
#include "ops/attention.h"

namespace nvfp4lm::test_attention_cuda {
namespace {

// BF16 tolerances (CUDA: BF16 operands, BF16 P / dS fragments, fp32 accumulation; reference: fp32), stated once:
constexpr double kMaxRelL2 = 1e-2;   // ||gpu - cpu|| / ||cpu|| per tensor
constexpr double kElementRms = 0.1;  // per element: |gpu - cpu| <= kElementRms * rms(cpu) + kElementRel * |cpu|
constexpr double kElementRel = 0.05;
constexpr double kLseAbs = 2e-3;  // lse (fp32 scores of BF16 inputs) per element, absolute

const Device kGpu = Device::cuda(0);

enum class Layout { Fused, Cache };  // q / k / v views of a fused [B, T, Hq + 2 Hkv, D] buffer, or a KV cache
enum class Segments { None, Packed, Repeated };

struct Case {
  int64_t batch, q_len, k_len, q_heads, kv_heads, dim, q_start;
  Layout layout;
  Segments segments = Segments::None;
  int64_t cache_len = 0;  // Layout::Cache: rows of the cache buffers (>= k_len; the tail is NaN)

  std::string str() const {
    const char* seg =
        segments == Segments::None ? "" : (segments == Segments::Packed ? " seg=packed" : " seg=repeated");
    return fmt::format("B={} Tq={} Tk={} Hq/Hkv={}/{} D={} q_start={}{}{}", batch, q_len, k_len, q_heads, kv_heads, dim,
                       q_start, layout == Layout::Cache ? " cache" : " fused", seg);
  }
};

Tensor to_dtype(const Tensor& t, DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype);
  convert_cpu(t, out);
  return out;
}

// A tensor of `shape` and `dtype` on the GPU filled with NaN.
Tensor nan_tensor(const Shape& shape, DType dtype) {
  std::vector<float> values(static_cast<size_t>(shape.numel()), std::numeric_limits<float>::quiet_NaN());
  return to_dtype(Tensor::from_floats(values, shape), dtype).to(kGpu);
}

struct Stats {
  double rel_l2 = 0, worst = 0;  // worst: max |err| / bound
  bool finite = true;
};

Stats check_close(const Tensor& gpu_values, const Tensor& expected, const std::string& what) {
  const std::vector<float> a = to_float_vector(gpu_values), e = to_float_vector(expected);
  EXPECT_EQ(a.size(), e.size()) << what;
  double sum_e2 = 0, sum_d2 = 0;
  for (size_t i = 0; i < e.size(); ++i) sum_e2 += static_cast<double>(e[i]) * e[i];
  const double rms = std::sqrt(sum_e2 / static_cast<double>(std::max<size_t>(e.size(), 1)));
  Stats s;
  int64_t bad = 0, first_bad = -1;
  for (size_t i = 0; i < e.size(); ++i) {
    const double d = static_cast<double>(a[i]) - e[i];
    if (!std::isfinite(a[i])) s.finite = false;
    sum_d2 += d * d;
    const double ratio = std::fabs(d) / (kElementRms * rms + kElementRel * std::fabs(e[i]) + 1e-30);
    s.worst = std::max(s.worst, std::isfinite(ratio) ? ratio : 1e30);
    if (!(ratio <= 1.0)) {
      if (first_bad < 0) first_bad = static_cast<int64_t>(i);
      ++bad;
    }
  }
  s.rel_l2 = sum_e2 > 0 ? std::sqrt(sum_d2 / sum_e2) : std::sqrt(sum_d2);
  EXPECT_TRUE(s.finite) << what << ": non-finite values (unwritten or NaN)";
  EXPECT_LT(s.rel_l2, kMaxRelL2) << what;
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements outside the bound, first at " << first_bad << " (gpu "
                    << (first_bad >= 0 ? a[static_cast<size_t>(first_bad)] : 0.f) << ", cpu "
                    << (first_bad >= 0 ? e[static_cast<size_t>(first_bad)] : 0.f) << ")";
  return s;
}

double max_abs_difference(const Tensor& gpu_values, const Tensor& expected) {
  const std::vector<float> a = to_float_vector(gpu_values), e = to_float_vector(expected);
  double worst = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - e[i]);
    worst = std::isfinite(d) ? std::max(worst, d) : 1e30;
  }
  return worst;
}

// Segment ids [B, T]: packed samples (increasing ids, random lengths) or ids that come back (0..2 at random).
std::vector<int32_t> make_segments(const Case& c, Rng& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(c.batch * c.q_len));
  for (int64_t b = 0; b < c.batch; ++b) {
    int32_t id = 0;
    int64_t left = 1 + static_cast<int64_t>(rng.below(90));
    for (int64_t t = 0; t < c.q_len; ++t) {
      if (c.segments == Segments::Repeated) {
        id = static_cast<int32_t>(rng.below(3));
      } else if (left-- == 0) {
        ++id;
        left = static_cast<int64_t>(rng.below(90));
      }
      ids[static_cast<size_t>(b * c.q_len + t)] = id;
    }
  }
  return ids;
}

// The operands of one case, as BF16 views on the GPU and as F32 views (same rounded values) on the CPU.
struct Operands {
  Tensor gpu_q, gpu_k, gpu_v, cpu_q, cpu_k, cpu_v;
  Tensor gpu_segments, cpu_segments;
  std::vector<Tensor> keep;  // the buffers the views point into

  Operands(const Case& c, Rng& rng) {
    if (c.layout == Layout::Fused) {
      const int64_t heads = c.q_heads + 2 * c.kv_heads;
      const Tensor bf = to_dtype(test::random_normal({c.batch, c.q_len, heads, c.dim}, rng), DType::BF16);
      const Tensor cpu = to_dtype(bf, DType::F32), gpu = bf.to(kGpu);
      keep = {cpu, gpu};
      cpu_q = cpu.narrow(2, 0, c.q_heads);
      cpu_k = cpu.narrow(2, c.q_heads, c.kv_heads);
      cpu_v = cpu.narrow(2, c.q_heads + c.kv_heads, c.kv_heads);
      gpu_q = gpu.narrow(2, 0, c.q_heads);
      gpu_k = gpu.narrow(2, c.q_heads, c.kv_heads);
      gpu_v = gpu.narrow(2, c.q_heads + c.kv_heads, c.kv_heads);
    } else {
      const Tensor q = to_dtype(test::random_normal({c.batch, c.q_len, c.q_heads, c.dim}, rng), DType::BF16);
      cpu_q = to_dtype(q, DType::F32);
      gpu_q = q.to(kGpu);
      for (int which = 0; which < 2; ++which) {
        Tensor cache = test::random_normal({c.batch, c.cache_len, c.kv_heads, c.dim}, rng);
        float* p = cache.data<float>();
        for (int64_t b = 0; b < c.batch; ++b)  // rows past k_len: NaN, which the kernels must never read
          for (int64_t i = c.k_len * c.kv_heads * c.dim; i < c.cache_len * c.kv_heads * c.dim; ++i)
            p[b * c.cache_len * c.kv_heads * c.dim + i] = std::numeric_limits<float>::quiet_NaN();
        const Tensor bf = to_dtype(cache, DType::BF16);
        const Tensor cpu = to_dtype(bf, DType::F32), gpu = bf.to(kGpu);
        keep.push_back(cpu);
        keep.push_back(gpu);
        (which == 0 ? cpu_k : cpu_v) = cpu.narrow(1, 0, c.k_len);
        (which == 0 ? gpu_k : gpu_v) = gpu.narrow(1, 0, c.k_len);
      }
    }
    if (c.segments != Segments::None) {
      cpu_segments = Tensor::from_ints(make_segments(c, rng), {c.batch, c.q_len});
      gpu_segments = cpu_segments.to(kGpu);
    }
  }

  AttentionOptions options(const Case& c, bool gpu) const {
    const Tensor* seg = c.segments == Segments::None ? nullptr : (gpu ? &gpu_segments : &cpu_segments);
    return AttentionOptions{1.f / std::sqrt(static_cast<float>(c.dim)), c.q_start, seg};
  }
};

void check_forward(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.str());
  Rng rng(seed);
  Operands x(c, rng);
  Tensor out = nan_tensor({c.batch, c.q_len, c.q_heads, c.dim}, DType::BF16);
  Tensor lse = nan_tensor({c.batch, c.q_heads, c.q_len}, DType::F32);
  attention_forward(x.gpu_q, x.gpu_k, x.gpu_v, out, x.options(c, true), &lse);

  Tensor ref_out = Tensor::empty({c.batch, c.q_len, c.q_heads, c.dim}, DType::F32);
  Tensor ref_lse = Tensor::empty({c.batch, c.q_heads, c.q_len}, DType::F32);
  attention_forward(x.cpu_q, x.cpu_k, x.cpu_v, ref_out, x.options(c, false), &ref_lse);

  const Stats s = check_close(out.to(Device::cpu()), ref_out, "out");
  const double lse_error = max_abs_difference(lse.to(Device::cpu()), ref_lse);
  EXPECT_LE(lse_error, kLseAbs) << "lse";
  fmt::print("[attention fwd ] {:<62} out rel {:.2e} worst {:.2f} of bound | lse max err {:.1e}\n", c.str(), s.rel_l2,
             s.worst, lse_error);
}

void check_backward(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.str());
  Rng rng(seed);
  Operands x(c, rng);
  const Tensor dout_bf = to_dtype(test::random_normal({c.batch, c.q_len, c.q_heads, c.dim}, rng), DType::BF16);
  const Tensor cpu_dout = to_dtype(dout_bf, DType::F32), gpu_dout = dout_bf.to(kGpu);

  // GPU: forward for out / lse, then gradients into NaN-poisoned buffers laid out like the inputs.
  Tensor out = nan_tensor({c.batch, c.q_len, c.q_heads, c.dim}, DType::BF16);
  Tensor lse = nan_tensor({c.batch, c.q_heads, c.q_len}, DType::F32);
  attention_forward(x.gpu_q, x.gpu_k, x.gpu_v, out, x.options(c, true), &lse);
  Tensor grads, dq, dk, dv;  // grads: the fused buffer (Layout::Fused)
  if (c.layout == Layout::Fused) {
    grads = nan_tensor({c.batch, c.q_len, c.q_heads + 2 * c.kv_heads, c.dim}, DType::BF16);
    dq = grads.narrow(2, 0, c.q_heads);
    dk = grads.narrow(2, c.q_heads, c.kv_heads);
    dv = grads.narrow(2, c.q_heads + c.kv_heads, c.kv_heads);
  } else {
    dq = nan_tensor({c.batch, c.q_len, c.q_heads, c.dim}, DType::BF16);
    dk = nan_tensor({c.batch, c.k_len, c.kv_heads, c.dim}, DType::BF16);
    dv = nan_tensor({c.batch, c.k_len, c.kv_heads, c.dim}, DType::BF16);
  }
  attention_backward(gpu_dout, x.gpu_q, x.gpu_k, x.gpu_v, out, lse, x.options(c, true), dq, dk, dv);

  Tensor ref_dq = Tensor::empty({c.batch, c.q_len, c.q_heads, c.dim}, DType::F32);
  Tensor ref_dk = Tensor::empty({c.batch, c.k_len, c.kv_heads, c.dim}, DType::F32);
  Tensor ref_dv = Tensor::empty({c.batch, c.k_len, c.kv_heads, c.dim}, DType::F32);
  attention_backward(cpu_dout, x.cpu_q, x.cpu_k, x.cpu_v, Tensor(), Tensor(), x.options(c, false), ref_dq, ref_dk,
                     ref_dv);

  Tensor host_dq, host_dk, host_dv;
  if (c.layout == Layout::Fused) {
    const Tensor host = grads.to(Device::cpu());
    host_dq = host.narrow(2, 0, c.q_heads);
    host_dk = host.narrow(2, c.q_heads, c.kv_heads);
    host_dv = host.narrow(2, c.q_heads + c.kv_heads, c.kv_heads);
  } else {
    host_dq = dq.to(Device::cpu());
    host_dk = dk.to(Device::cpu());
    host_dv = dv.to(Device::cpu());
  }
  const Stats sq = check_close(host_dq, ref_dq, "dq");
  const Stats sk = check_close(host_dk, ref_dk, "dk");
  const Stats sv = check_close(host_dv, ref_dv, "dv");
  fmt::print("[attention bwd ] {:<62} rel dq {:.2e} dk {:.2e} dv {:.2e} | worst {:.2f} of bound\n", c.str(), sq.rel_l2,
             sk.rel_l2, sv.rel_l2, std::max({sq.worst, sk.worst, sv.worst}));
}

TEST(AttentionCuda, ForwardMatchesCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const Case cases[] = {
      {1, 1, 1, 4, 2, 64, 0, Layout::Fused},
      {2, 17, 17, 4, 2, 16, 0, Layout::Fused},
      {1, 128, 128, 32, 8, 128, 0, Layout::Fused},
      {2, 300, 300, 4, 2, 64, 0, Layout::Fused},
      {1, 300, 300, 32, 8, 128, 0, Layout::Fused, Segments::Packed},
      {2, 128, 128, 4, 2, 16, 0, Layout::Fused, Segments::Repeated},
      {2, 17, 17, 2, 2, 64, 0, Layout::Fused, Segments::Packed},
  };
  uint64_t seed = 100;
  for (const Case& c : cases) check_forward(c, seed++);
}

TEST(AttentionCuda, DecodeAndQueryOffsetMatchCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const Case cases[] = {
      {1, 1, 300, 32, 8, 128, 299, Layout::Cache, Segments::None, 320},  // one token, split keys
      {2, 3, 1003, 32, 8, 128, 1000, Layout::Cache, Segments::None, 1100},
      {1, 1, 4100, 32, 8, 128, 4099, Layout::Cache, Segments::None, 4200},
      {2, 17, 22, 4, 2, 16, 5, Layout::Cache, Segments::None, 64},       // 34 rows: three row groups
      {2, 16, 16, 4, 1, 64, 0, Layout::Cache, Segments::None, 16},       // 64 rows, the decode path's limit
      {1, 40, 140, 32, 8, 64, 100, Layout::Cache, Segments::None, 160},  // chunked prefill: the flash kernel
  };
  uint64_t seed = 200;
  for (const Case& c : cases) check_forward(c, seed++);
}

// Per-row query starts read on the device (AttentionOptions::q_start_rows, the CUDA-graph decode step): rows of
// one batch at very different cache lengths, planned for the whole cache; each row's keys past its start are NaN
// and must never be read. The CPU runs each row with its own q_start.
TEST(AttentionCuda, PerRowStartsReadOnTheDevice) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  struct RowsCase {
    int64_t q_heads, kv_heads, dim, cache_len;
    std::vector<int32_t> starts;
  };
  const RowsCase cases[] = {{32, 8, 128, 4200, {0, 299, 4150}}, {4, 2, 64, 100, {63, 0}}, {4, 2, 16, 17, {16}}};
  uint64_t seed = 400;
  for (const RowsCase& c : cases) {
    const int64_t batch = static_cast<int64_t>(c.starts.size());
    const std::string what = fmt::format("B={} Hq/Hkv={}/{} D={} cache={} starts={}", batch, c.q_heads, c.kv_heads,
                                         c.dim, c.cache_len, fmt::join(c.starts, ","));
    SCOPED_TRACE(what);
    Rng rng(seed++);
    const Tensor q = to_dtype(test::random_normal({batch, 1, c.q_heads, c.dim}, rng), DType::BF16);
    Tensor kv[2];
    for (Tensor& cache : kv) {
      cache = test::random_normal({batch, c.cache_len, c.kv_heads, c.dim}, rng);
      float* p = cache.data<float>();
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = (c.starts[static_cast<size_t>(b)] + 1) * c.kv_heads * c.dim;
             i < c.cache_len * c.kv_heads * c.dim; ++i)
          p[b * c.cache_len * c.kv_heads * c.dim + i] = std::numeric_limits<float>::quiet_NaN();
      cache = to_dtype(cache, DType::BF16);
    }
    const Tensor cpu_starts = Tensor::from_ints(c.starts, {batch});
    const Tensor gpu_starts = cpu_starts.to(kGpu);
    AttentionOptions options{1.f / std::sqrt(static_cast<float>(c.dim)), c.cache_len - 1, nullptr};

    Tensor out = nan_tensor({batch, 1, c.q_heads, c.dim}, DType::BF16);
    Tensor lse = nan_tensor({batch, c.q_heads, 1}, DType::F32);
    options.q_start_rows = &gpu_starts;
    attention_forward(q.to(kGpu), kv[0].to(kGpu), kv[1].to(kGpu), out, options, &lse);

    Tensor ref_out = Tensor::empty({batch, 1, c.q_heads, c.dim}, DType::F32);
    Tensor ref_lse = Tensor::empty({batch, c.q_heads, 1}, DType::F32);
    options.q_start_rows = &cpu_starts;
    attention_forward(to_dtype(q, DType::F32), to_dtype(kv[0], DType::F32), to_dtype(kv[1], DType::F32), ref_out,
                      options, &ref_lse);

    const Stats s = check_close(out.to(Device::cpu()), ref_out, "out");
    const double lse_error = max_abs_difference(lse.to(Device::cpu()), ref_lse);
    EXPECT_LE(lse_error, kLseAbs) << "lse";
    fmt::print("[attention rows] {:<62} out rel {:.2e} worst {:.2f} of bound | lse max err {:.1e}\n", what, s.rel_l2,
               s.worst, lse_error);
  }
}

// Per-row cache rows (AttentionOptions::kv_rows, the batched decode step over a pool of slots): each row reads its
// own row of a larger cache, in any order; rows no one reads are NaN, and so is every key past a row's start. GPU
// vs CPU, and each GPU row bit for bit what the same row gives in a batch of one (the key split is planned per row,
// so a sequence's attention does not depend on the batch it is in).
TEST(AttentionCuda, PerRowCacheRowsReadTheirOwnSlot) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  // Long enough that a lone row would be split over more CTAs than a row of a batch of three if the plan counted
  // the batch (132 emulated SMs: 132 splits alone vs 44 in the batch, for 66 key tiles).
  const int64_t q_heads = 8, kv_heads = 2, dim = 64, cache_len = 4200, pool = 5;
  const std::vector<int32_t> starts = {3000, 0, 4199}, rows = {3, 0, 1};
  const auto batch = static_cast<int64_t>(starts.size());
  Rng rng(450);
  const Tensor q = to_dtype(test::random_normal({batch, 1, q_heads, dim}, rng), DType::BF16);
  Tensor kv[2];
  for (Tensor& cache : kv) {
    cache = test::random_normal({pool, cache_len, kv_heads, dim}, rng);
    float* p = cache.data<float>();
    for (int64_t row = 0; row < pool; ++row) {
      const auto reader = std::find(rows.begin(), rows.end(), static_cast<int32_t>(row));
      const int64_t valid = reader == rows.end() ? 0 : starts[static_cast<size_t>(reader - rows.begin())] + 1;
      for (int64_t i = valid * kv_heads * dim; i < cache_len * kv_heads * dim; ++i)
        p[row * cache_len * kv_heads * dim + i] = std::numeric_limits<float>::quiet_NaN();
    }
    cache = to_dtype(cache, DType::BF16);
  }
  const Tensor gpu_k = kv[0].to(kGpu), gpu_v = kv[1].to(kGpu);
  const Tensor cpu_starts = Tensor::from_ints(starts, {batch}), cpu_rows = Tensor::from_ints(rows, {batch});
  const Tensor gpu_starts = cpu_starts.to(kGpu), gpu_rows = cpu_rows.to(kGpu);
  AttentionOptions options{1.f / std::sqrt(static_cast<float>(dim)), cache_len - 1, nullptr};
  options.q_start_rows = &gpu_starts;
  options.kv_rows = &gpu_rows;
  Tensor out = nan_tensor({batch, 1, q_heads, dim}, DType::BF16);
  attention_forward(q.to(kGpu), gpu_k, gpu_v, out, options);

  Tensor ref_out = Tensor::empty({batch, 1, q_heads, dim}, DType::F32);
  options.q_start_rows = &cpu_starts;
  options.kv_rows = &cpu_rows;
  attention_forward(to_dtype(q, DType::F32), to_dtype(kv[0], DType::F32), to_dtype(kv[1], DType::F32), ref_out,
                    options);
  const Stats s = check_close(out.to(Device::cpu()), ref_out, "out");
  fmt::print("[attention cache rows] out rel {:.2e} worst {:.2f} of bound\n", s.rel_l2, s.worst);

  for (int64_t b = 0; b < batch; ++b) {
    const Tensor one_start = cpu_starts.narrow(0, b, 1).contiguous().to(kGpu);
    const Tensor one_row = cpu_rows.narrow(0, b, 1).contiguous().to(kGpu);
    AttentionOptions single{options.scale, cache_len - 1, nullptr};
    single.q_start_rows = &one_start;
    single.kv_rows = &one_row;
    Tensor alone = nan_tensor({1, 1, q_heads, dim}, DType::BF16);
    attention_forward(q.narrow(0, b, 1).contiguous().to(kGpu), gpu_k, gpu_v, alone, single);
    EXPECT_EQ(to_float_vector(to_dtype(out.narrow(0, b, 1).to(Device::cpu()).contiguous(), DType::F32)),
              to_float_vector(to_dtype(alone.to(Device::cpu()), DType::F32)))
        << "row " << b << " in a batch of " << batch << " vs alone";
  }
}

TEST(AttentionCuda, BackwardMatchesCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const Case cases[] = {
      {2, 17, 17, 4, 2, 16, 0, Layout::Fused},
      {1, 128, 128, 32, 8, 128, 0, Layout::Fused},
      {2, 300, 300, 4, 2, 64, 0, Layout::Fused, Segments::Packed},
      {1, 300, 300, 32, 8, 128, 0, Layout::Fused},
      {1, 128, 128, 4, 2, 16, 0, Layout::Fused, Segments::Repeated},
      {1, 40, 140, 4, 2, 64, 100, Layout::Cache, Segments::None, 140},
      {1, 20, 64, 4, 2, 128, 30, Layout::Cache, Segments::None, 64},  // keys 50..63 are never seen: zero grads
  };
  uint64_t seed = 300;
  for (const Case& c : cases) check_backward(c, seed++);
}

// Blackwell SM 12.x (RTX PRO / RTX 50, the DGX Spark's GB10) gives a block 99 KiB of shared memory, not Hopper's
// 227: the backward's double-buffered tiles for head_dim 128 (106 KiB) do not fit there, and it runs one stage
// (ops/cuda/attention_backward.cu). On the emulated device presenting a GB10, with that limit, it matches the CPU.
TEST(AttentionCuda, BackwardFitsTheSharedMemoryOfAGb10) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const test::EmulatedArch gb10(121);
  const Case cases[] = {
      {1, 130, 130, 32, 8, 128, 0, Layout::Fused},
      {2, 100, 100, 4, 2, 128, 0, Layout::Fused, Segments::Packed},
      {1, 40, 140, 4, 2, 64, 100, Layout::Cache, Segments::None, 140},
  };
  uint64_t seed = 400;
  for (const Case& c : cases) check_backward(c, seed++);
}

TEST(AttentionCuda, UnsupportedHeadDimIsAnError) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Tensor q = Tensor::zeros({1, 4, 2, 32}, DType::BF16, kGpu);
  Tensor out = Tensor::zeros({1, 4, 2, 32}, DType::BF16, kGpu);
  EXPECT_THROW(attention_forward(q, q, q, out, {0.5f}), Error);
}

}  // namespace
}  // namespace nvfp4lm::test_attention_cuda
