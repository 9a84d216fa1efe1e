// store_kv_rows (ops/kv_store.h) on the CPU: fresh tokens land at their slots of a cache (also a cache that is a
// view with a padded token stride), other slots keep their values, and a slot outside the cache is an error.
#include <gtest/gtest.h>

#include "core/rng.h"
#include "ops/kv_store.h"
#include "ops_testing.h"

namespace nvfp4lm::test_kv_store {
namespace {

TEST(KvStore, TokensLandAtTheirSlots) {
  Rng rng(7);
  const int64_t batch = 2, tokens = 3, slots = 6, heads = 2, dim = 4;
  const Tensor fresh = test::random_normal({batch, tokens, heads, dim}, rng);
  // The cache is a view: 8 slots allocated, the first 6 used, as narrow()ed from a longer buffer.
  Tensor storage = test::random_normal({batch, 8, heads, dim}, rng);
  const Tensor before = storage.clone();
  Tensor cache = storage.narrow(1, 0, slots);
  const std::vector<int32_t> where = {5, 0, 2, 1, 4, 3};
  store_kv_rows(fresh, cache, Tensor::from_ints(where, {batch, tokens}));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < 8; ++s) {
      int64_t source = -1;
      for (int64_t t = 0; t < tokens; ++t)
        if (s < slots && where[static_cast<size_t>(b * tokens + t)] == s) source = t;
      const Tensor got = storage.select(0, b).select(0, s);
      const Tensor want = source >= 0 ? fresh.select(0, b).select(0, source) : before.select(0, b).select(0, s);
      EXPECT_EQ(to_float_vector(got), to_float_vector(want)) << "row " << b << " slot " << s;
    }
  }
}

TEST(KvStore, SlotOutsideTheCacheIsAnError) {
  const Tensor fresh = Tensor::zeros({1, 1, 1, 4}, DType::F32);
  Tensor cache = Tensor::zeros({1, 3, 1, 4}, DType::F32);
  EXPECT_THROW(store_kv_rows(fresh, cache, Tensor::from_ints({3}, {1, 1})), Error);
  EXPECT_THROW(store_kv_rows(fresh, cache, Tensor::from_ints({-1}, {1, 1})), Error);
  EXPECT_THROW(store_kv_rows(fresh, cache, Tensor::from_ints({0, 1}, {1, 2})), Error);  // slots shape
}

}  // namespace
}  // namespace nvfp4lm::test_kv_store
