// The CPU reference gives bit-identical results for any OpenMP thread count (fixed reduction chunks, one
// writer per output element): checkpoint resume and CPU-vs-CPU comparisons rely on it.
#include <gtest/gtest.h>
#include <omp.h>

#include <functional>

#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/rmsnorm.h"
#include "ops_testing.h"

namespace nvfp4lm::test_determinism {
namespace {

// Runs `compute` with 1 and with 3 threads; every returned value must be identical.
void expect_thread_independent(const std::function<std::vector<float>()>& compute, const std::string& what) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one = compute();
  omp_set_num_threads(3);
  const std::vector<float> three = compute();
  omp_set_num_threads(saved);
  ASSERT_EQ(one.size(), three.size());
  for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(one[i], three[i]) << what << " element " << i;
}

TEST(Determinism, ReductionsDoNotDependOnThreadCount) {
  Rng rng(80);
  Tensor x = test::random_normal({700, 96}, rng), dy = test::random_normal({700, 96}, rng);
  Tensor w = test::random_normal({96}, rng);
  expect_thread_independent(
      [&] {
        Tensor y = Tensor::empty({700, 96}, DType::F32), rstd = Tensor::empty({700}, DType::F32);
        Tensor dx = Tensor::empty({700, 96}, DType::F32), dw = Tensor::zeros({96}, DType::F32);
        rmsnorm_forward(x, w, 1e-6f, y, &rstd);
        rmsnorm_backward(dy, x, w, rstd, dx, dw);
        std::vector<float> all = to_float_vector(dx), part = to_float_vector(dw);
        all.insert(all.end(), part.begin(), part.end());
        all.push_back(static_cast<float>(sum_squares(x)));
        return all;
      },
      "rmsnorm / sum_squares");

  std::vector<int32_t> ids(700);
  for (auto& id : ids) id = static_cast<int32_t>(rng.below(50));
  expect_thread_independent(
      [&] {
        Tensor dtable = Tensor::zeros({50, 96}, DType::F32);
        embedding_backward(Tensor::from_ints(ids, {700}), dy, dtable);
        return to_float_vector(dtable);
      },
      "embedding_backward");

  Tensor lm_head = test::random_normal({40, 96}, rng, 0.3f);
  std::vector<int32_t> targets(700);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = i % 5 == 0 ? kIgnoreIndex : ids[i] % 40;
  expect_thread_independent(
      [&] {
        Tensor dh = Tensor::empty({700, 96}, DType::F32), dw = Tensor::zeros({40, 96}, DType::F32);
        const CrossEntropyResult r =
            lm_head_cross_entropy(x, lm_head, Tensor::from_ints(targets, {700}), 1.f / 560, &dh, &dw);
        std::vector<float> all = to_float_vector(dh), part = to_float_vector(dw);
        all.insert(all.end(), part.begin(), part.end());
        all.push_back(static_cast<float>(r.loss_sum));
        return all;
      },
      "cross-entropy");
}

TEST(Determinism, AttentionDoesNotDependOnThreadCount) {
  Rng rng(81);
  Tensor q = test::random_normal({2, 70, 4, 32}, rng), k = test::random_normal({2, 70, 2, 32}, rng);
  Tensor v = test::random_normal({2, 70, 2, 32}, rng), dout = test::random_normal({2, 70, 4, 32}, rng);
  expect_thread_independent(
      [&] {
        Tensor out = Tensor::empty(q.shape(), DType::F32), lse = Tensor::empty({2, 4, 70}, DType::F32);
        Tensor dq = Tensor::empty(q.shape(), DType::F32), dk = Tensor::empty(k.shape(), DType::F32);
        Tensor dv = Tensor::empty(v.shape(), DType::F32);
        const AttentionOptions options{0.2f};
        attention_forward(q, k, v, out, options, &lse);
        attention_backward(dout, q, k, v, out, lse, options, dq, dk, dv);
        std::vector<float> all = to_float_vector(out);
        for (const Tensor* t : {&dq, &dk, &dv}) {
          const std::vector<float> part = to_float_vector(*t);
          all.insert(all.end(), part.begin(), part.end());
        }
        return all;
      },
      "attention");
}

}  // namespace
}  // namespace nvfp4lm::test_determinism
