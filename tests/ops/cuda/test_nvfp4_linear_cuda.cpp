// CUDA NVFP4 linear (ops/nvfp4_linear.h on CUDA) vs the CPU path (dequantize + sgemm / fused rows) on the same
// BF16-rounded x and the same packed weight: the fused W4A16 kernel for N = 1 .. 32 (1, 2 and 4 column tiles), and
// dequant + gemm for N = 64, 300 (skipped while the CUDA gemm is missing), odd output sizes, an input size that is not
// a multiple of 128 (partial chunk) and one that is not a multiple of 32 (dequant path even for one row), every code
// (including 0.5, whose BF16 form is subnormal) and every finite scale byte (E4M3 subnormals and zero included),
// row-strided x and y views, a scratch smaller than the weight. y is poisoned with NaN first. The decode-step fusions
// (q/k/v in one launch, the residual add, gate/up + SwiGLU) give the bits of the op sequence they replace, and a row of
// a batch the bits it gets alone. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/rng.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/nvfp4_linear.h"
#include "ops/ops_testing.h"
#include "ops/swiglu.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::test_nvfp4_linear_cuda {
namespace {

// BF16 tolerances, stated once. The fused kernel multiplies exact weights with BF16 x in fp32 and rounds y to
// BF16; dequant + gemm also rounds the weight to BF16.
constexpr double kMaxRelL2 = 1e-2;    // ||gpu - cpu|| / ||cpu||
constexpr double kElementRms = 2e-2;  // per element: |gpu - cpu| <= kElementRms * rms(cpu) + kElementRel * |cpu|
constexpr double kElementRel = 1e-2;

const Device kGpu = Device::cuda(0);

Tensor to_dtype(const Tensor& t, DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype);
  convert_cpu(t, out);
  return out;
}

// Random codes (all 16) and scale bytes (any finite E4M3: 0x00..0x7E, sign clear), tensor scale `tensor_scale`.
Nvfp4Tensor random_weight(int64_t rows, int64_t cols, float tensor_scale, Rng& rng) {
  Nvfp4Tensor w = test::empty_nvfp4(rows, cols, tensor_scale);
  auto* codes = static_cast<uint8_t*>(w.codes.raw());
  auto* scales = static_cast<uint8_t*>(w.block_scales.raw());
  for (int64_t i = 0; i < w.codes.numel(); ++i) codes[i] = static_cast<uint8_t>(rng.below(256));
  for (int64_t i = 0; i < w.block_scales.numel(); ++i) {
    // Mostly realistic scales (0x30..0x5F), some tiny / subnormal / zero ones.
    scales[i] = static_cast<uint8_t>(rng.below(8) == 0 ? rng.below(0x7F) : 0x30 + rng.below(0x30));
  }
  return w;
}

Nvfp4Tensor on_gpu(const Nvfp4Tensor& w) {
  Nvfp4Tensor g = w;
  g.codes = w.codes.to(kGpu);
  g.block_scales = w.block_scales.to(kGpu);
  return g;
}

bool cuda_gemm_available() {
  static const bool available = [] {
    try {
      Tensor a = Tensor::zeros({16, 16}, DType::BF16, kGpu), c = Tensor::zeros({16, 16}, DType::BF16, kGpu);
      gemm(a, false, a, true, c);
      return true;
    } catch (const Error&) {
      return false;
    }
  }();
  return available;
}

struct Case {
  int64_t n, out, in;
  int64_t scratch_rows = 0;  // 0: the whole weight
};

void check_case(const Case& c, uint64_t seed) {
  const std::string what = fmt::format("N={} out={} in={}{}", c.n, c.out, c.in,
                                       c.scratch_rows ? fmt::format(" scratch {} rows", c.scratch_rows) : "");
  SCOPED_TRACE(what);
  Rng rng(seed);
  const Nvfp4Tensor w = random_weight(c.out, c.in, 3.7e-4f, rng);
  const Nvfp4Tensor gw = on_gpu(w);

  // x: BF16 rows inside a wider buffer (row stride in + 24, a multiple of 8 elements); y likewise (out + 5).
  const Tensor x_wide = to_dtype(test::random_normal({c.n, c.in + 24}, rng), DType::BF16);
  const Tensor cpu_x = to_dtype(x_wide, DType::F32).narrow(1, 8, c.in);
  const Tensor gpu_x_wide = x_wide.to(kGpu);
  const Tensor gpu_x = gpu_x_wide.narrow(1, 8, c.in);
  std::vector<float> nan(static_cast<size_t>(c.n * (c.out + 5)), std::numeric_limits<float>::quiet_NaN());
  Tensor gpu_y_wide = to_dtype(Tensor::from_floats(nan, {c.n, c.out + 5}), DType::BF16).to(kGpu);
  Tensor gpu_y = gpu_y_wide.narrow(1, 0, c.out);
  const int64_t scratch_elements = c.scratch_rows ? c.scratch_rows * c.in : nvfp4_linear_scratch_elements(w);
  Tensor gpu_scratch = Tensor::empty({scratch_elements}, DType::BF16, kGpu);
  nvfp4_linear_forward(gpu_x, gw, gpu_y, gpu_scratch);

  Tensor cpu_y = Tensor::empty({c.n, c.out}, DType::F32);
  Tensor cpu_scratch = Tensor::empty({nvfp4_linear_scratch_elements(w)}, DType::F32);
  nvfp4_linear_forward(cpu_x, w, cpu_y, cpu_scratch);

  const Tensor host_wide = gpu_y_wide.to(Device::cpu());
  const std::vector<float> a = to_float_vector(host_wide.narrow(1, 0, c.out)), e = to_float_vector(cpu_y);
  const std::vector<float> padding = to_float_vector(host_wide.narrow(1, c.out, 5));
  double sum_e2 = 0, sum_d2 = 0, worst = 0;
  for (float v : e) sum_e2 += static_cast<double>(v) * v;
  const double rms = std::sqrt(sum_e2 / static_cast<double>(e.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    const double d = static_cast<double>(a[i]) - e[i];
    sum_d2 += d * d;
    const double ratio = std::fabs(d) / (kElementRms * rms + kElementRel * std::fabs(e[i]));
    worst = std::max(worst, std::isfinite(ratio) ? ratio : 1e30);
    if (!(ratio <= 1.0)) ++bad;
  }
  const double rel = std::sqrt(sum_d2 / sum_e2);
  EXPECT_LT(rel, kMaxRelL2);
  EXPECT_EQ(bad, 0) << "elements outside the per-element bound";
  EXPECT_TRUE(std::all_of(padding.begin(), padding.end(), [](float v) { return std::isnan(v); }))
      << "wrote outside y's view";
  fmt::print("[nvfp4 linear  ] {:<36} rel {:.2e} worst {:.2f} of bound\n", what, rel, worst);
}

TEST(Nvfp4LinearCuda, FusedKernelMatchesCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const Case cases[] = {
      {1, 2560, 2560}, {2, 777, 1024}, {7, 33, 4096}, {8, 3, 64},    {1, 17, 96},
      {2, 1, 9728},    {9, 100, 512},  {16, 48, 256}, {17, 40, 320}, {32, 65, 1024},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) check_case(c, seed++);
}

std::vector<uint16_t> bits_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  std::vector<uint16_t> out(static_cast<size_t>(host.numel()));
  std::memcpy(out.data(), host.raw(), out.size() * sizeof(uint16_t));
  return out;
}

Tensor random_bf16_gpu(const Shape& shape, Rng& rng) {
  return to_dtype(test::random_normal(shape, rng), DType::BF16).to(kGpu);
}

TEST(Nvfp4LinearCuda, DecodeFusionsGiveTheBitsOfTheOpSequence) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(11);
  const int64_t in = 320;  // two and a half chunks of 128
  // q / k / v of different sizes (one not a multiple of the 16-row tile), gate and up, o and down.
  const Nvfp4Tensor q = on_gpu(random_weight(72, in, 3.7e-4f, rng)), k = on_gpu(random_weight(24, in, 2.1e-4f, rng)),
                    v = on_gpu(random_weight(17, in, 5.3e-4f, rng));
  const Nvfp4Tensor gate = on_gpu(random_weight(41, in, 3.1e-4f, rng)),
                    up = on_gpu(random_weight(41, in, 4.4e-4f, rng));
  const Nvfp4Tensor o = on_gpu(random_weight(64, in, 2.9e-4f, rng));
  for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{32}, int64_t{45}}) {
    SCOPED_TRACE(fmt::format("N={}", n));
    const Tensor x = random_bf16_gpu({n, in}, rng);
    ASSERT_TRUE(nvfp4_decode_fusions_supported(x, {&q, &k, &v, &gate, &up, &o}));
    Tensor scratch = Tensor::empty({72 * in}, DType::BF16, kGpu);
    auto linear = [&](const Nvfp4Tensor& w) {
      Tensor y = Tensor::empty({n, w.rows}, DType::BF16, kGpu);
      nvfp4_linear_forward(x, w, y, scratch, LinearRows::Independent);
      return y;
    };

    Tensor yq = Tensor::empty({n, q.rows}, DType::BF16, kGpu), yk = Tensor::empty({n, k.rows}, DType::BF16, kGpu),
           yv = Tensor::empty({n, v.rows}, DType::BF16, kGpu);
    nvfp4_linears_forward(x, {{&q, &yq}, {&k, &yk}, {&v, &yv}});
    EXPECT_EQ(bits_of(yq), bits_of(linear(q)));
    EXPECT_EQ(bits_of(yk), bits_of(linear(k)));
    EXPECT_EQ(bits_of(yv), bits_of(linear(v)));

    const Tensor residual = random_bf16_gpu({n, o.rows}, rng);
    Tensor fused = residual.clone();
    nvfp4_linear_add_forward(x, o, fused);
    Tensor sequence = residual.clone();
    add_inplace(sequence, linear(o));
    EXPECT_EQ(bits_of(fused), bits_of(sequence));

    Tensor act = Tensor::empty({n, gate.rows}, DType::BF16, kGpu), act_sequence = act.clone();
    nvfp4_swiglu_forward(x, gate, up, act);
    swiglu_forward(linear(gate), linear(up), act_sequence);
    EXPECT_EQ(bits_of(act), bits_of(act_sequence));
  }
}

TEST(Nvfp4LinearCuda, ARowOfABatchGetsTheBitsItGetsAlone) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(12);
  const Nvfp4Tensor w = on_gpu(random_weight(48, 2560, 3.7e-4f, rng));
  const Tensor x = random_bf16_gpu({40, 2560}, rng);  // a group of 32 rows (4 column tiles) and one of 8
  Tensor scratch = Tensor::empty({48 * 2560}, DType::BF16, kGpu);
  Tensor batch = Tensor::empty({40, 48}, DType::BF16, kGpu);
  nvfp4_linear_forward(x, w, batch, scratch, LinearRows::Independent);
  const std::vector<uint16_t> all = bits_of(batch);
  for (const int64_t row : {int64_t{0}, int64_t{9}, int64_t{31}, int64_t{39}}) {
    Tensor alone = Tensor::empty({1, 48}, DType::BF16, kGpu);
    nvfp4_linear_forward(x.narrow(0, row, 1), w, alone, scratch, LinearRows::Independent);
    EXPECT_EQ(bits_of(alone), std::vector<uint16_t>(all.begin() + row * 48, all.begin() + (row + 1) * 48))
        << "row " << row;
  }
}

TEST(Nvfp4LinearCuda, DequantGemmMatchesCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  if (!cuda_gemm_available()) GTEST_SKIP() << "no CUDA gemm yet (ops/gemm.h)";
  const Case cases[] = {
      {64, 777, 1024},
      {300, 257, 512},
      {1, 50, 48} /* in % 32 != 0 */,
      {64, 300, 256, 37} /* row blocks */,
  };
  uint64_t seed = 100;
  for (const Case& c : cases) check_case(c, seed++);
}

}  // namespace
}  // namespace nvfp4lm::test_nvfp4_linear_cuda
