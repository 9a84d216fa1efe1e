// The decode step's fused QK-norm + RoPE + KV-cache store (ops/qk_norm_rope_store.h) on CUDA against the op
// sequence it replaces (rmsnorm_forward, rope_forward, store_kv_rows) run on the same device: the same bits in q,
// k and both caches, for Qwen3's head_dim and the other sizes the kernel takes, positions anywhere in the table,
// slots anywhere in the cache (one outside it: skipped by both), and a position outside the table (reported at the
// next call, as rope_forward reports it). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend_harness.h"
#include "core/cuda/runtime.h"
#include "ops/kv_store.h"
#include "ops/qk_norm_rope_store.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"

namespace nvfp4lm::test::backend::test_qk_norm_rope_store_cuda {
namespace {

std::vector<uint16_t> bits(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  std::vector<uint16_t> out(static_cast<size_t>(host.numel()));
  std::memcpy(out.data(), host.raw(), out.size() * sizeof(uint16_t));
  return out;
}

struct Operands {
  Tensor q, k, v, cache_keys, cache_values;
};

Operands make_operands(int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t cache_slots,
                       Rng& rng) {
  Operands o;
  o.q = upload(random_normal({batch, 1, q_heads, head_dim}, rng, 3.f), DType::BF16);
  o.k = upload(random_normal({batch, 1, kv_heads, head_dim}, rng, 3.f), DType::BF16);
  o.v = upload(random_normal({batch, 1, kv_heads, head_dim}, rng), DType::BF16);
  o.cache_keys = upload(random_normal({1, cache_slots, kv_heads, head_dim}, rng), DType::BF16);
  o.cache_values = upload(random_normal({1, cache_slots, kv_heads, head_dim}, rng), DType::BF16);
  return o;
}

Operands copy(const Operands& o) {
  return {o.q.clone(), o.k.clone(), o.v.clone(), o.cache_keys.clone(), o.cache_values.clone()};
}

TEST(QkNormRopeStoreCuda, OneLaunchGivesTheBitsOfTheOpSequence) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(21);
  for (const int64_t head_dim : {int64_t{128}, int64_t{64}, int64_t{16}, int64_t{256}}) {
    SCOPED_TRACE(fmt::format("head_dim {}", head_dim));
    const int64_t batch = 5, q_heads = 6, kv_heads = 2, cache_slots = 40;
    const RopeTable rope(head_dim, 5e6f, 64, gpu());
    const Tensor q_norm = upload(random_normal({head_dim}, rng, 0.5f), DType::F32);
    const Tensor k_norm = upload(random_normal({head_dim}, rng, 0.5f), DType::F32);
    const Tensor positions = Tensor::from_ints({0, 63, 17, 5, 31}, {batch, 1}).to(gpu());
    const Tensor slots = Tensor::from_ints({3, 39, 0, 40 /* outside: skipped */, 22}, {1, batch}).to(gpu());
    const Operands start = make_operands(batch, q_heads, kv_heads, head_dim, cache_slots, rng);
    ASSERT_TRUE(qk_norm_rope_store_fused(start.q, start.k, start.v, start.cache_keys, start.cache_values));

    Operands fused = copy(start);
    qk_norm_rope_store(fused.q, fused.k, fused.v, q_norm, k_norm, 1e-6f, positions, rope, fused.cache_keys,
                       fused.cache_values, slots);

    Operands sequence = copy(start);
    rmsnorm_forward(sequence.q, q_norm, 1e-6f, sequence.q);
    rmsnorm_forward(sequence.k, k_norm, 1e-6f, sequence.k);
    rope_forward(sequence.q, positions, rope);
    rope_forward(sequence.k, positions, rope);
    store_kv_rows(sequence.k.reshape({1, batch, kv_heads, head_dim}), sequence.cache_keys, slots);
    store_kv_rows(sequence.v.reshape({1, batch, kv_heads, head_dim}), sequence.cache_values, slots);

    EXPECT_EQ(bits(fused.q), bits(sequence.q));
    EXPECT_EQ(bits(fused.k), bits(sequence.k));
    EXPECT_EQ(bits(fused.cache_keys), bits(sequence.cache_keys));
    EXPECT_EQ(bits(fused.cache_values), bits(sequence.cache_values));
    EXPECT_NE(bits(fused.cache_keys), bits(start.cache_keys)) << "the keys were stored";
  }
}

TEST(QkNormRopeStoreCuda, APositionOutsideTheTableIsReportedAtTheNextCall) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(22);
  const RopeTable rope(128, 5e6f, 16, gpu());
  const Tensor norm = upload(random_normal({128}, rng), DType::F32);
  Operands o = make_operands(2, 4, 2, 128, 8, rng);
  const Tensor slots = Tensor::from_ints({1, 2}, {1, 2}).to(gpu());
  qk_norm_rope_store(o.q, o.k, o.v, norm, norm, 1e-6f, Tensor::from_ints({3, 16}, {2, 1}).to(gpu()), rope, o.cache_keys,
                     o.cache_values, slots);
  cuda::synchronize();
  try {
    qk_norm_rope_store(o.q, o.k, o.v, norm, norm, 1e-6f, Tensor::from_ints({3, 4}, {2, 1}).to(gpu()), rope,
                       o.cache_keys, o.cache_values, slots);
    ADD_FAILURE() << "expected the position 16 of the earlier call to be reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nvfp4lm::test::backend::test_qk_norm_rope_store_cuda
