// Batch-invariant CUDA kernels (ops/batch_invariance.h, `--deterministic`): with them on, a row's result has the
// same bits whatever rows share the call, and a prompt position's attention the same bits whatever chunk it is in;
// each checked bit for bit against the row alone, and the row-exact linear against a double-precision reference.
// Off, the linears' and the prompt attention's equalities fail (cuBLASLt, the dequant + GEMM path, the decode kernel
// for a short chunk): they are what the mode adds.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/rng.h"
#include "ops/attention.h"
#include "ops/batch_invariance.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/row_exact_linear.h"
#include "ops/gemm.h"
#include "ops/nvfp4_linear.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::test_batch_invariance_cuda {
namespace {

const Device kGpu = Device::cuda(0);

Tensor to_dtype(const Tensor& t, DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype);
  convert_cpu(t, out);
  return out;
}

Tensor as_f32(const Tensor& t) { return to_dtype(t.to(Device::cpu()).contiguous(), DType::F32); }

// The bytes of a tensor (on any device), to compare results bit for bit.
std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).contiguous();
  const auto* p = static_cast<const uint8_t*>(host.raw());
  return {p, p + host.nbytes()};
}

// y [N, O] of linear_forward with Independent rows, and each row computed alone; the rows must be equal bytes.
void expect_rows_alone_equal_batch(const Tensor& x, const Tensor& w, DType out_dtype, LinearRows rows,
                                   const std::string& what) {
  const int64_t n = x.dim(0), o = w.dim(0);
  Tensor y = Tensor::empty({n, o}, out_dtype, kGpu);
  linear_forward(x, w, y, rows);
  for (int64_t r = 0; r < n; ++r) {
    Tensor alone = Tensor::empty({1, o}, out_dtype, kGpu);
    linear_forward(x.narrow(0, r, 1), w, alone, rows);
    ASSERT_EQ(bytes_of(alone), bytes_of(y.narrow(0, r, 1))) << what << ": row " << r << " of " << n;
  }
}

TEST(BatchInvariantCuda, RowExactLinearRowsAloneEqualTheBatchAndTheReference) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const BatchInvariantKernels on(true);
  struct Case {
    DType in, out;
    int64_t k, o;
  };
  // K = 136: 16-byte chunks; K = 100: element-wise loads, the last chunk padded. O = 300: a ragged last block.
  const Case cases[] = {{DType::BF16, DType::BF16, 136, 300},
                        {DType::BF16, DType::F32, 100, 300},
                        {DType::F32, DType::F32, 136, 130},
                        {DType::F16, DType::F16, 64, 129}};
  uint64_t seed = 7100;
  for (const Case& c : cases) {
    Rng rng(seed++);
    const Tensor x_host = to_dtype(test::random_normal({40, c.k}, rng), c.in);
    const Tensor w_host = to_dtype(test::random_normal({c.o, c.k}, rng), c.in);
    const Tensor x = x_host.to(kGpu), w = w_host.to(kGpu);
    for (int64_t n : {1, 3, 16, 17, 40}) {
      const std::string what = fmt::format("{} -> {} K={} O={} N={}", dtype_name(c.in), dtype_name(c.out), c.k, c.o, n);
      expect_rows_alone_equal_batch(x.narrow(0, 0, n), w, c.out, LinearRows::Independent, what);
    }
    // Against a double-precision reference: fp32 sums of K products, then the output's rounding.
    Tensor y = Tensor::empty({40, c.o}, c.out, kGpu);
    linear_forward(x, w, y, LinearRows::Prefill);
    const Tensor got = as_f32(y), xf = as_f32(x_host), wf = as_f32(w_host);
    const double out_eps = c.out == DType::BF16 ? 0x1p-8 : (c.out == DType::F16 ? 0x1p-11 : 0x1p-24);
    for (int64_t r = 0; r < 40; ++r) {
      for (int64_t f = 0; f < c.o; ++f) {
        double sum = 0, magnitude = 0;
        for (int64_t i = 0; i < c.k; ++i) {
          const double term = static_cast<double>(xf.data<float>()[r * c.k + i]) * wf.data<float>()[f * c.k + i];
          sum += term;
          magnitude += std::fabs(term);
        }
        const double bound = static_cast<double>(c.k) * 0x1p-24 * magnitude + out_eps * (std::fabs(sum) + 1e-30);
        ASSERT_LE(std::fabs(got.data<float>()[r * c.o + f] - sum), bound)
            << dtype_name(c.in) << " row " << r << " feature " << f;
      }
    }
  }
}

// A row-strided x (a narrow()ed wider buffer: element-wise loads) gives the bits of the contiguous x (16-byte loads).
TEST(BatchInvariantCuda, RowExactLinearLoadsDoNotChangeTheSum) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const BatchInvariantKernels on(true);
  Rng rng(7200);
  const Tensor wide = to_dtype(test::random_normal({5, 137}, rng), DType::BF16);
  const Tensor w = to_dtype(test::random_normal({70, 136}, rng), DType::BF16).to(kGpu);
  const Tensor strided = wide.to(kGpu).narrow(1, 1, 136);
  const Tensor contiguous = wide.narrow(1, 1, 136).contiguous().to(kGpu);
  Tensor a = Tensor::empty({5, 70}, DType::F32, kGpu), b = Tensor::empty({5, 70}, DType::F32, kGpu);
  linear_forward(strided, w, a, LinearRows::Independent);
  linear_forward(contiguous, w, b, LinearRows::Independent);
  EXPECT_EQ(bytes_of(a), bytes_of(b));
}

// NVFP4 weights: more than 32 Prefill rows run the fused kernel in groups, each row as alone.
TEST(BatchInvariantCuda, Nvfp4PrefillRowsAloneEqualTheBatch) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const BatchInvariantKernels on(true);
  Rng rng(7300);
  const Nvfp4Tensor host = quantize_nvfp4(test::random_normal({96, 256}, rng));
  Nvfp4Tensor w = host;
  w.codes = host.codes.to(kGpu);
  w.block_scales = host.block_scales.to(kGpu);
  const Tensor x = to_dtype(test::random_normal({70, 256}, rng), DType::BF16).to(kGpu);
  Tensor scratch = Tensor::empty({nvfp4_linear_scratch_elements(w)}, DType::BF16, kGpu);
  Tensor y = Tensor::empty({70, 96}, DType::BF16, kGpu);
  nvfp4_linear_forward(x, w, y, scratch, LinearRows::Prefill);
  for (int64_t r = 0; r < 70; r += 3) {
    Tensor alone = Tensor::empty({1, 96}, DType::BF16, kGpu);
    nvfp4_linear_forward(x.narrow(0, r, 1), w, alone, scratch, LinearRows::Prefill);
    ASSERT_EQ(bytes_of(alone), bytes_of(y.narrow(0, r, 1))) << "row " << r;
  }
}

struct AttentionInputs {
  Tensor q, k, v;  // BF16 on the GPU: q [1, T, Hq, D], k / v [1, T, Hkv, D]
};

AttentionInputs random_attention(int64_t tokens, int64_t q_heads, int64_t kv_heads, int64_t dim, uint64_t seed) {
  Rng rng(seed);
  AttentionInputs in;
  in.q = to_dtype(test::random_normal({1, tokens, q_heads, dim}, rng), DType::BF16).to(kGpu);
  in.k = to_dtype(test::random_normal({1, tokens, kv_heads, dim}, rng), DType::BF16).to(kGpu);
  in.v = to_dtype(test::random_normal({1, tokens, kv_heads, dim}, rng), DType::BF16).to(kGpu);
  return in;
}

// Prompt rows (AttentionOptions::prompt) in chunks of 1, 5, 64 and 69 at growing offsets: every row the bits of the
// whole prompt's, although chunks of few rows would take the decode kernel without the mode.
TEST(BatchInvariantCuda, PromptRowsOfAttentionDoNotDependOnTheChunk) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const BatchInvariantKernels on(true);
  const int64_t tokens = 70, q_heads = 4, kv_heads = 2, dim = 64;
  const AttentionInputs in = random_attention(tokens, q_heads, kv_heads, dim, 7400);
  AttentionOptions options;
  options.scale = 1.f / std::sqrt(static_cast<float>(dim));
  options.prompt = true;
  Tensor whole = Tensor::empty({1, tokens, q_heads, dim}, DType::BF16, kGpu);
  attention_forward(in.q, in.k, in.v, whole, options);
  for (int64_t chunk : {1, 5, 64, 69}) {
    for (int64_t start = 0; start < tokens; start += chunk) {
      const int64_t count = std::min(chunk, tokens - start);
      AttentionOptions at = options;
      at.q_start = start;
      Tensor out = Tensor::empty({1, count, q_heads, dim}, DType::BF16, kGpu);
      attention_forward(in.q.narrow(1, start, count).contiguous(), in.k.narrow(1, 0, start + count),
                        in.v.narrow(1, 0, start + count), out, at);
      ASSERT_EQ(bytes_of(out), bytes_of(whole.narrow(1, start, count))) << "chunks of " << chunk << " at " << start;
    }
  }
}

// Decode rows (the mode changes nothing here; this states why it need not): a row of a batched step over a large
// cache (planned for its capacity, per-row starts on the device) gets the bits it gets alone over exactly its own
// keys. With 8 kv heads the plan wants 33 splits of 2 tiles for 4200 keys; each row re-splits its own tiles
// (ops/cuda/attention_decode.cu), as it is split alone.
TEST(BatchInvariantCuda, DecodeRowsDoNotDependOnThePlannedStart) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const BatchInvariantKernels on(true);
  const int64_t q_heads = 8, kv_heads = 8, dim = 64, cache_len = 4200;
  const std::vector<int32_t> starts = {0, 299, 4150};
  const int64_t batch = static_cast<int64_t>(starts.size());
  Rng rng(7500);
  const Tensor q = to_dtype(test::random_normal({batch, 1, q_heads, dim}, rng), DType::BF16).to(kGpu);
  const Tensor k = to_dtype(test::random_normal({batch, cache_len, kv_heads, dim}, rng), DType::BF16).to(kGpu);
  const Tensor v = to_dtype(test::random_normal({batch, cache_len, kv_heads, dim}, rng), DType::BF16).to(kGpu);
  const Tensor gpu_starts = Tensor::from_ints(starts, {batch}).to(kGpu);
  AttentionOptions options;
  options.scale = 1.f / std::sqrt(static_cast<float>(dim));
  options.q_start = cache_len - 1;
  options.q_start_rows = &gpu_starts;
  Tensor out = Tensor::empty({batch, 1, q_heads, dim}, DType::BF16, kGpu);
  attention_forward(q, k, v, out, options);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t start = starts[static_cast<size_t>(b)];
    AttentionOptions alone_options;
    alone_options.scale = options.scale;
    alone_options.q_start = start;
    Tensor alone = Tensor::empty({1, 1, q_heads, dim}, DType::BF16, kGpu);
    attention_forward(q.narrow(0, b, 1), k.narrow(0, b, 1).narrow(1, 0, start + 1),
                      v.narrow(0, b, 1).narrow(1, 0, start + 1), alone, alone_options);
    EXPECT_EQ(bytes_of(alone), bytes_of(out.narrow(0, b, 1))) << "row " << b << " at " << start;
  }
}

}  // namespace
}  // namespace nvfp4lm::test_batch_invariance_cuda
