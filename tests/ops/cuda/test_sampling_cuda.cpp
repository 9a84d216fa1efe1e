// CUDA token selection (ops/cuda/sampling.cu) vs the CPU reference: argmax on Qwen-sized rows with ties, NaN and
// -inf rows; top-k / top-p draws id for id on random rows and on one row over a grid of uniforms (so every kept
// token's interval is hit), for several option sets. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "core/rng.h"
#include "ops/sampling.h"

namespace nvfp4lm::test_sampling_cuda {
namespace {

const Device kGpu = Device::cuda(0);
constexpr int64_t kVocab = 151936;  // Qwen3

std::vector<int32_t> ids_of(const Tensor& ids) {
  const Tensor host = ids.to(Device::cpu());
  return std::vector<int32_t>(host.data<int32_t>(), host.data<int32_t>() + host.numel());
}

// Rows of logits like a language model's: most around 0, a few large; values on a 1/8 grid (ties).
Tensor random_logits(int64_t rows, int64_t vocab, Rng& rng) {
  Tensor t = test::random_normal({rows, vocab}, rng, 2.f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (rng.below(1000) == 0) p[i] += 12.f;
    p[i] = std::round(p[i] * 8.f) / 8.f;
  }
  return t;
}

TEST(SamplingCuda, ArgmaxMatchesCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(1);
  Tensor logits = random_logits(6, kVocab, rng);
  float* p = logits.data<float>();
  p[0 * kVocab + 5000] = p[0 * kVocab + 90000] = 100.f;  // tie: the lower id
  p[1 * kVocab + kVocab - 1] = 100.f;                    // the last id
  for (int64_t i = 0; i < kVocab; i += 3) p[2 * kVocab + i] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < kVocab; ++i) p[3 * kVocab + i] = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < kVocab; ++i) p[4 * kVocab + i] = std::numeric_limits<float>::quiet_NaN();
  Tensor cpu_ids = Tensor::empty({6}, DType::I32), gpu_ids = Tensor::empty({6}, DType::I32, kGpu);
  sample_argmax(logits, cpu_ids);
  sample_argmax(logits.to(kGpu), gpu_ids);
  EXPECT_EQ(ids_of(gpu_ids), ids_of(cpu_ids));
  EXPECT_EQ(ids_of(gpu_ids)[0], 5000);
  fmt::print("[sampling argmax] 6 rows x {}: gpu == cpu\n", kVocab);
}

void check_draws(const Tensor& logits, const std::vector<float>& uniforms, const TopKTopP& options,
                 const std::string& what) {
  SCOPED_TRACE(what);
  const int64_t rows = logits.dim(0);
  Tensor u = Tensor::from_floats(uniforms, {rows});
  Tensor cpu_ids = Tensor::empty({rows}, DType::I32),
         gpu_ids = Tensor::from_ints(std::vector<int32_t>(rows, -1), {rows}).to(kGpu);
  sample_top_k_top_p(logits, u, options, cpu_ids);
  sample_top_k_top_p(logits.to(kGpu), u.to(kGpu), options, gpu_ids);
  const std::vector<int32_t> cpu = ids_of(cpu_ids), gpu = ids_of(gpu_ids);
  int64_t mismatches = 0, distinct = 0;
  std::vector<bool> seen(static_cast<size_t>(logits.dim(1)), false);
  for (int64_t r = 0; r < rows; ++r) {
    if (cpu[static_cast<size_t>(r)] != gpu[static_cast<size_t>(r)]) {
      if (mismatches < 5)
        ADD_FAILURE() << "row " << r << " u " << uniforms[static_cast<size_t>(r)] << ": gpu "
                      << gpu[static_cast<size_t>(r)] << ", cpu " << cpu[static_cast<size_t>(r)];
      ++mismatches;
    }
    if (!seen[static_cast<size_t>(cpu[static_cast<size_t>(r)])]) ++distinct;
    seen[static_cast<size_t>(cpu[static_cast<size_t>(r)])] = true;
  }
  EXPECT_EQ(mismatches, 0);
  fmt::print("[sampling draws ] {:<52} {} rows, {} distinct ids, {} mismatches\n", what, rows, distinct, mismatches);
}

TEST(SamplingCuda, TopKTopPMatchesCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(2);
  const TopKTopP settings[] = {{0.7f, 20, 0.8f}, {1.f, 0, 0.95f}, {1.f, 50, 1.f}, {1.f, 0, 1.f}, {0.3f, 1, 1.f}};
  // Random rows, random uniforms (8 rows of the real vocabulary: the emulated device spends ~3 s a row here, and the
  // uniform grid below visits every kept token's interval anyway).
  const Tensor logits = random_logits(8, kVocab, rng);
  std::vector<float> uniforms(8);
  for (float& u : uniforms) u = rng.uniform();
  for (const TopKTopP& o : settings)
    check_draws(logits, uniforms, o, fmt::format("random rows T={} k={} p={}", o.temperature, o.top_k, o.top_p));
  // One row drawn over a grid of uniforms: every kept token's interval is visited.
  constexpr int64_t kGrid = 512, kSmallVocab = 3000;
  const Tensor row = random_logits(1, kSmallVocab, rng);
  std::vector<float> grid_rows, grid_u;
  for (int64_t j = 0; j < kGrid; ++j) {
    grid_rows.insert(grid_rows.end(), row.data<float>(), row.data<float>() + kSmallVocab);
    grid_u.push_back((static_cast<float>(j) + 0.5f) / kGrid);
  }
  const Tensor grid = Tensor::from_floats(grid_rows, {kGrid, kSmallVocab});
  for (const TopKTopP& o : settings)
    check_draws(grid, grid_u, o, fmt::format("uniform grid T={} k={} p={}", o.temperature, o.top_k, o.top_p));
}

}  // namespace
}  // namespace nvfp4lm::test_sampling_cuda
