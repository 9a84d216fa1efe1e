// Attention: forward (out, lse) vs a naive double implementation with an explicit mask matrix — causal, GQA,
// packing segments (contiguous and repeated ids), views of a fused q|k|v buffer and of a KV cache; decode with
// q_start > 0 equals the rows of a full forward; backward vs finite differences (GQA + segments), with and
// without the saved lse, overwriting dq / dk / dv.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/attention.h"
#include "ops_testing.h"

namespace nvfp4lm::test_attention {
namespace {

struct Dims {
  int64_t batch, q_len, k_len, q_heads, kv_heads, dim;
};

struct AttentionReference {
  std::vector<double> out, lse;  // out [B, Tq, Hq, D], lse [B, Hq, Tq]
};

// Direct formula: full score matrix, explicit boolean mask, softmax, weighted sum — all in double.
AttentionReference naive_attention(const std::vector<double>& q, const std::vector<double>& k,
                                   const std::vector<double>& v, const Dims& d, double scale, int64_t q_start,
                                   const std::vector<int32_t>* segments) {
  AttentionReference ref{std::vector<double>(static_cast<size_t>(d.batch * d.q_len * d.q_heads * d.dim)),
                         std::vector<double>(static_cast<size_t>(d.batch * d.q_heads * d.q_len))};
  const int64_t group = d.q_heads / d.kv_heads;
  auto qi = [&](int64_t b, int64_t t, int64_t h, int64_t i) {
    return static_cast<size_t>(((b * d.q_len + t) * d.q_heads + h) * d.dim + i);
  };
  auto ki = [&](int64_t b, int64_t s, int64_t h, int64_t i) {
    return static_cast<size_t>(((b * d.k_len + s) * d.kv_heads + h) * d.dim + i);
  };
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.q_heads; ++h)
      for (int64_t t = 0; t < d.q_len; ++t) {
        std::vector<bool> mask(static_cast<size_t>(d.k_len));
        std::vector<double> score(static_cast<size_t>(d.k_len), -std::numeric_limits<double>::infinity());
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t s = 0; s < d.k_len; ++s) {
          bool visible = s <= q_start + t;
          if (segments != nullptr)
            visible = visible && (*segments)[static_cast<size_t>(b * d.k_len + s)] ==
                                     (*segments)[static_cast<size_t>(b * d.q_len + t)];
          mask[static_cast<size_t>(s)] = visible;
          if (!visible) continue;
          double dot = 0;
          for (int64_t i = 0; i < d.dim; ++i) dot += q[qi(b, t, h, i)] * k[ki(b, s, h / group, i)];
          score[static_cast<size_t>(s)] = scale * dot;
          max_score = std::max(max_score, scale * dot);
        }
        double sum = 0;
        for (int64_t s = 0; s < d.k_len; ++s)
          if (mask[static_cast<size_t>(s)]) sum += std::exp(score[static_cast<size_t>(s)] - max_score);
        for (int64_t s = 0; s < d.k_len; ++s) {
          if (!mask[static_cast<size_t>(s)]) continue;
          const double p = std::exp(score[static_cast<size_t>(s)] - max_score) / sum;
          for (int64_t i = 0; i < d.dim; ++i) ref.out[qi(b, t, h, i)] += p * v[ki(b, s, h / group, i)];
        }
        ref.lse[static_cast<size_t>((b * d.q_heads + h) * d.q_len + t)] = max_score + std::log(sum);
      }
  return ref;
}

// q, k, v as views into one fused [B, T, Hq + 2 Hkv, D] buffer (the layout of the fused projection).
struct FusedQkv {
  Tensor fused, q, k, v;
  FusedQkv(const Dims& d, Rng& rng) {
    fused = test::random_normal({d.batch, d.q_len, d.q_heads + 2 * d.kv_heads, d.dim}, rng);
    q = fused.narrow(2, 0, d.q_heads);
    k = fused.narrow(2, d.q_heads, d.kv_heads);
    v = fused.narrow(2, d.q_heads + d.kv_heads, d.kv_heads);
  }
};

void check_forward(const Dims& d, const std::vector<int32_t>* segments, uint64_t seed) {
  Rng rng(seed);
  FusedQkv qkv(d, rng);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.dim));
  Tensor seg = segments ? Tensor::from_ints(*segments, {d.batch, d.q_len}) : Tensor();
  AttentionOptions options{static_cast<float>(scale), 0, segments ? &seg : nullptr};
  Tensor out = Tensor::empty({d.batch, d.q_len, d.q_heads, d.dim}, DType::F32);
  Tensor lse = Tensor::empty({d.batch, d.q_heads, d.q_len}, DType::F32);
  attention_forward(qkv.q, qkv.k, qkv.v, out, options, &lse);
  const AttentionReference ref =
      naive_attention(test::to_doubles(qkv.q), test::to_doubles(qkv.k), test::to_doubles(qkv.v), d, scale, 0, segments);
  const std::string what = fmt::format("B={} T={} Hq={} Hkv={} D={}{}", d.batch, d.q_len, d.q_heads, d.kv_heads, d.dim,
                                       segments ? " segments" : "");
  test::expect_near_doubles(out, ref.out, test::kForwardTol, "out " + what);
  test::expect_near_doubles(lse, ref.lse, test::kForwardTol, "lse " + what);
}

TEST(Attention, CausalForwardMatchesNaive) {
  check_forward({2, 9, 9, 3, 3, 8}, nullptr, 40);  // multi-head
  check_forward({2, 9, 9, 4, 2, 8}, nullptr, 41);  // GQA 2:1
  check_forward({1, 5, 5, 6, 1, 5}, nullptr, 42);  // multi-query, odd head_dim
}

TEST(Attention, LongRowsSpanSeveralQueryBlocks) { check_forward({1, 150, 150, 4, 2, 16}, nullptr, 43); }

TEST(Attention, VectorisedHeadDims) {
  // head_dim 64 / 128 run the register-blocked kernels without tails; 40 adds a column tail; 3 q heads per
  // kv head make row counts that are not multiples of 4.
  check_forward({2, 37, 37, 8, 2, 64}, nullptr, 143);
  check_forward({1, 20, 20, 2, 1, 128}, nullptr, 144);
  check_forward({1, 33, 33, 6, 2, 40}, nullptr, 145);
}

TEST(Attention, PackedSegmentsDoNotSeeEachOther) {
  const std::vector<int32_t> contiguous{0, 0, 0, 1, 1, 2, 2, 2, 2, 5, 5, 5, 5, 5, 7, 9, 9, 9};  // [2, 9]
  check_forward({2, 9, 9, 4, 2, 8}, &contiguous, 44);
  // Ids that come back later in the row: only equal ids see each other.
  const std::vector<int32_t> repeated{3, 3, 1, 1, 3, 1, 3, 3, 1};
  check_forward({1, 9, 9, 2, 1, 4}, &repeated, 45);
}

TEST(Attention, DecodeWithQueryOffsetEqualsRowsOfTheFullForward) {
  Rng rng(46);
  const int64_t batch = 2, seq = 11, q_heads = 4, kv_heads = 2, dim = 8, max_len = 16;
  const float scale = 1.f / std::sqrt(static_cast<float>(dim));
  Tensor q = test::random_normal({batch, seq, q_heads, dim}, rng);
  // k / v live in a KV cache [B, Tmax, Hkv, D]; the attention sees its first `seq` positions.
  Tensor k_cache = test::random_normal({batch, max_len, kv_heads, dim}, rng);
  Tensor v_cache = test::random_normal({batch, max_len, kv_heads, dim}, rng);
  Tensor k = k_cache.narrow(1, 0, seq), v = v_cache.narrow(1, 0, seq);
  Tensor full = Tensor::empty({batch, seq, q_heads, dim}, DType::F32);
  attention_forward(q, k, v, full, {scale});
  // Prefill of 7 queries, then one-token decode steps, each seeing the cache up to its position.
  const int64_t prefill = 7;
  Tensor head = Tensor::empty({batch, prefill, q_heads, dim}, DType::F32);
  attention_forward(q.narrow(1, 0, prefill), k_cache.narrow(1, 0, prefill), v_cache.narrow(1, 0, prefill), head,
                    {scale});
  test::expect_close(head, full.narrow(1, 0, prefill).contiguous(), test::kF32Tol, "prefill rows");
  for (int64_t pos = prefill; pos < seq; ++pos) {
    Tensor step = Tensor::empty({batch, 1, q_heads, dim}, DType::F32);
    attention_forward(q.narrow(1, pos, 1), k_cache.narrow(1, 0, pos + 1), v_cache.narrow(1, 0, pos + 1), step,
                      {scale, pos});
    test::expect_close(step, full.narrow(1, pos, 1).contiguous(), test::kF32Tol, fmt::format("decode at {}", pos));
  }
  // Several queries at once with an offset (chunked prefill).
  Tensor tail = Tensor::empty({batch, 3, q_heads, dim}, DType::F32);
  attention_forward(q.narrow(1, 8, 3), k, v, tail, {scale, 8});
  test::expect_close(tail, full.narrow(1, 8, 3).contiguous(), test::kF32Tol, "offset chunk");
}

// Per-row starts (AttentionOptions::q_start_rows): one decode query per row at different cache lengths, over the
// whole cache; each row equals a call with that row's q_start and keys. Cache rows past a row's start are NaN:
// never read.
TEST(Attention, PerRowStartsEqualOneCallPerRow) {
  Rng rng(246);
  const int64_t batch = 3, q_heads = 4, kv_heads = 2, dim = 8, max_len = 16;
  const float scale = 1.f / std::sqrt(static_cast<float>(dim));
  const std::vector<int32_t> starts = {0, 9, 15};
  Tensor q = test::random_normal({batch, 1, q_heads, dim}, rng);
  Tensor k_cache = test::random_normal({batch, max_len, kv_heads, dim}, rng);
  Tensor v_cache = test::random_normal({batch, max_len, kv_heads, dim}, rng);
  std::vector<Tensor> expected;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t keys = starts[static_cast<size_t>(b)] + 1;
    Tensor row = Tensor::empty({1, 1, q_heads, dim}, DType::F32);
    attention_forward(q.narrow(0, b, 1), k_cache.narrow(0, b, 1).narrow(1, 0, keys),
                      v_cache.narrow(0, b, 1).narrow(1, 0, keys), row, {scale, keys - 1});
    expected.push_back(row);
    for (Tensor* cache : {&k_cache, &v_cache})
      cache->narrow(0, b, 1)
          .narrow(1, keys, max_len - keys)
          .copy_from(Tensor::from_floats(std::vector<float>(static_cast<size_t>((max_len - keys) * kv_heads * dim),
                                                            std::numeric_limits<float>::quiet_NaN()),
                                         {1, max_len - keys, kv_heads, dim}));
  }
  const Tensor rows = Tensor::from_ints(starts, {batch});
  Tensor out = Tensor::empty({batch, 1, q_heads, dim}, DType::F32);
  Tensor lse = Tensor::empty({batch, q_heads, 1}, DType::F32);
  AttentionOptions options{scale, max_len - 1};
  options.q_start_rows = &rows;
  attention_forward(q, k_cache, v_cache, out, options, &lse);
  for (int64_t b = 0; b < batch; ++b)
    EXPECT_EQ(to_float_vector(out.narrow(0, b, 1)), to_float_vector(expected[static_cast<size_t>(b)])) << "row " << b;
  // A start past q_start is an internal error.
  const Tensor bad = Tensor::from_ints({0, 9, 16}, {batch});
  options.q_start_rows = &bad;
  EXPECT_THROW(attention_forward(q, k_cache, v_cache, out, options), Error);
}

// kv_rows: rows of a batched decode step read their own rows of a larger cache (a pool of slots), in any order;
// each equals a call with its own row and start. An out-of-range cache row is an internal error.
TEST(Attention, PerRowCacheRowsReadTheirOwnSlot) {
  Rng rng(247);
  const int64_t batch = 3, pool = 5, q_heads = 4, kv_heads = 2, dim = 8, max_len = 12;
  const float scale = 1.f / std::sqrt(static_cast<float>(dim));
  const std::vector<int32_t> starts = {4, 0, 11}, cache_rows = {3, 0, 4};
  const Tensor q = test::random_normal({batch, 1, q_heads, dim}, rng);
  const Tensor k_cache = test::random_normal({pool, max_len, kv_heads, dim}, rng);
  const Tensor v_cache = test::random_normal({pool, max_len, kv_heads, dim}, rng);
  const Tensor start_tensor = Tensor::from_ints(starts, {batch});
  const Tensor row_tensor = Tensor::from_ints(cache_rows, {batch});
  AttentionOptions options{scale, max_len - 1};
  options.q_start_rows = &start_tensor;
  options.kv_rows = &row_tensor;
  Tensor out = Tensor::empty({batch, 1, q_heads, dim}, DType::F32);
  attention_forward(q, k_cache, v_cache, out, options);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t keys = starts[static_cast<size_t>(b)] + 1, row = cache_rows[static_cast<size_t>(b)];
    Tensor expected = Tensor::empty({1, 1, q_heads, dim}, DType::F32);
    attention_forward(q.narrow(0, b, 1), k_cache.narrow(0, row, 1).narrow(1, 0, keys),
                      v_cache.narrow(0, row, 1).narrow(1, 0, keys), expected, {scale, keys - 1});
    EXPECT_EQ(to_float_vector(out.narrow(0, b, 1)), to_float_vector(expected)) << "row " << b;
  }
  const Tensor bad = Tensor::from_ints({3, 0, 5}, {batch});
  options.kv_rows = &bad;
  EXPECT_THROW(attention_forward(q, k_cache, v_cache, out, options), Error);
}

void check_backward(const Dims& d, const std::vector<int32_t>* segments, bool with_lse, uint64_t seed) {
  Rng rng(seed);
  FusedQkv qkv(d, rng);
  Tensor dout = test::random_normal({d.batch, d.q_len, d.q_heads, d.dim}, rng);
  const double scale = 0.7;
  Tensor seg = segments ? Tensor::from_ints(*segments, {d.batch, d.q_len}) : Tensor();
  AttentionOptions options{static_cast<float>(scale), 0, segments ? &seg : nullptr};

  std::vector<double> qd = test::to_doubles(qkv.q), kd = test::to_doubles(qkv.k), vd = test::to_doubles(qkv.v);
  const std::vector<double> rd = test::to_doubles(dout);
  auto loss = [&] { return test::dot(naive_attention(qd, kd, vd, d, scale, 0, segments).out, rd); };
  const std::vector<double> dq_expected = test::finite_difference(qd, loss);
  const std::vector<double> dk_expected = test::finite_difference(kd, loss);
  const std::vector<double> dv_expected = test::finite_difference(vd, loss);

  Tensor out = Tensor::empty({d.batch, d.q_len, d.q_heads, d.dim}, DType::F32);
  Tensor lse = Tensor::empty({d.batch, d.q_heads, d.q_len}, DType::F32);
  attention_forward(qkv.q, qkv.k, qkv.v, out, options, &lse);
  // Gradients land in a fused buffer pre-filled with garbage: every element must be overwritten.
  FusedQkv grads(d, rng);
  attention_backward(dout, qkv.q, qkv.k, qkv.v, out, with_lse ? lse : Tensor(), options, grads.q, grads.k, grads.v);
  const std::string what = fmt::format("B={} T={} Hq={} Hkv={}{}{}", d.batch, d.q_len, d.q_heads, d.kv_heads,
                                       segments ? " segments" : "", with_lse ? " lse" : "");
  test::expect_near_doubles(grads.q, dq_expected, test::kGradTol, "dq " + what);
  test::expect_near_doubles(grads.k, dk_expected, test::kGradTol, "dk " + what);
  test::expect_near_doubles(grads.v, dv_expected, test::kGradTol, "dv " + what);
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  check_backward({2, 6, 6, 4, 2, 4}, nullptr, true, 47);
  check_backward({1, 5, 5, 3, 3, 3}, nullptr, false, 48);
  const std::vector<int32_t> segments{0, 0, 1, 1, 1, 2, 4, 4, 4, 4, 4, 4};  // [2, 6]
  check_backward({2, 6, 6, 4, 1, 4}, &segments, true, 49);
  check_backward({1, 7, 7, 3, 1, 32}, nullptr, true, 149);   // vectorised head_dim, 3-row groups
  check_backward({1, 5, 5, 2, 2, 40}, nullptr, false, 150);  // column tail
}

TEST(Attention, InvalidOptionsAreRejected) {
  Tensor q = Tensor::zeros({1, 4, 2, 4}, DType::F32), kv = Tensor::zeros({1, 4, 2, 4}, DType::F32);
  Tensor out = Tensor::empty({1, 4, 2, 4}, DType::F32);
  EXPECT_THROW(attention_forward(q, kv, kv, out, {0.5f, 1}), Error);  // needs q_start + Tq <= Tk
  EXPECT_THROW(attention_forward(q, kv, kv, out, {}), Error);         // scale not set
  Tensor kv3 = Tensor::zeros({1, 4, 3, 4}, DType::F32);
  EXPECT_THROW(attention_forward(q, kv3, kv3, out, {0.5f}), Error);  // 2 q heads, 3 kv heads
}

}  // namespace
}  // namespace nvfp4lm::test_attention
