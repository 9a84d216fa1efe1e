// Qwen3DecodeStep (model/qwen3_decode_step.h) on the CPU, in its eager form: the fixed-buffer decode step (cache
// slots and attention starts read from the positions tensor) gives exactly the logits of forward_cached, for dense
// and NVFP4 models, tied and untied, two cache rows; after the cache is truncated (a chat turn that rewinds) it
// continues from the right place; a full cache is the same Error as forward_cached; Graph mode needs CUDA; rows of
// a slot pool at their own positions (run_rows) equal each sequence decoded alone.
// The CUDA graph itself is tested in tests/model/cuda/test_qwen3_cuda.cpp.
#include <gtest/gtest.h>

#include "model/model_test_util.h"
#include "model/qwen3_decode_step.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test::test_qwen3_decode_step {
namespace {

// One generated token through forward_cached: the decode kernels, as the decode step (model/qwen3_model.h).
Tensor decode_cached(const Qwen3Model& model, const Tensor& ids, KVCache& cache) {
  return model.forward_cached(ids, cache, false, kNoLoraAdapter, Qwen3Model::Tokens::Generated);
}

// Prefill `prefill` tokens in both caches, then every later token through forward_cached in one and the decode
// step in the other: equal logits, bit for bit.
void check_against_forward_cached(const Qwen3Model& model, const Tensor& ids, const std::string& what) {
  const int64_t batch = ids.dim(0), tokens = ids.dim(1), prefill = 4;
  KVCache reference = model.make_cache(batch, tokens + 2);
  KVCache cache = model.make_cache(batch, tokens + 2);
  Qwen3DecodeStep step(model, cache, DecodeMode::Eager);
  EXPECT_EQ(step.describe(), "eager");
  const Tensor head = ids.narrow(1, 0, prefill).contiguous();
  model.forward_cached(head, reference);
  model.forward_cached(head, cache);
  for (int64_t t = prefill; t < tokens; ++t) {
    const Tensor expected = decode_cached(model, ids.narrow(1, t, 1).contiguous(), reference);
    const Tensor& actual = step.run(ids_at(ids, t));
    ASSERT_EQ(actual.shape(), expected.shape()) << what;
    EXPECT_EQ(to_float_vector(actual), to_float_vector(expected)) << what << ": step at position " << t;
    EXPECT_EQ(cache.length(), t + 1);
  }
  // Rewind both to 6 tokens (a chat turn that keeps a common prefix) and go on with other tokens.
  reference.set_length(6);
  cache.set_length(6);
  for (int64_t t = 0; t < 3; ++t) {
    const Tensor expected = decode_cached(model, ids.narrow(1, t, 1).contiguous(), reference);
    EXPECT_EQ(to_float_vector(step.run(ids_at(ids, t))), to_float_vector(expected)) << what << ": after rewinding";
  }
}

TEST(Qwen3DecodeStep, EagerStepEqualsForwardCached) {
  for (bool tied : {false, true}) {
    const Reference ref(tied);
    const Qwen3Model model = Qwen3Model::load(tiny_model_dir(tied));
    check_against_forward_cached(model, ref.get("input_ids"), tied ? "tied" : "untied");
  }
}

TEST(Qwen3DecodeStep, EagerStepEqualsForwardCachedForNvfp4) {
  const Reference ref(false);
  TempDir dir;
  const Qwen3Model model = Qwen3Model::load(quantize_tiny_modelopt(dir, false, /*quantize_lm_head=*/true));
  ASSERT_TRUE(model.weights().lm_head.is_nvfp4());
  check_against_forward_cached(model, ref.get("input_ids"), "NVFP4");
}

// run_rows: three sequences of different lengths in rows 2, 0 and 3 of a 4-row pool, decoded together, each at
// its own position: every row's logits equal those of its sequence decoded alone in a batch-1 cache (forward_cached),
// bit for bit, step after step, and so do the keys it leaves in its row of the pool.
void check_rows_against_alone(const Qwen3Model& model, const std::string& what) {
  const std::vector<std::vector<int32_t>> prompts = {{5, 17, 99}, {1, 2, 3, 4, 5, 6, 7}, {42}};
  const std::vector<int32_t> cache_rows = {2, 0, 3};
  const int64_t max_tokens = 16;
  KVCache pool = model.make_cache(4, max_tokens);
  std::vector<KVCache> alone;
  std::vector<int32_t> positions;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto length = static_cast<int64_t>(prompts[i].size());
    const Tensor ids = Tensor::from_ints(prompts[i], Shape{1, length});
    KVCache row = pool.row_view(cache_rows[i]);
    model.forward_cached(ids, row);
    alone.push_back(model.make_cache(1, max_tokens));
    model.forward_cached(ids, alone.back());
    positions.push_back(static_cast<int32_t>(length));
  }
  Qwen3DecodeStep step(model, pool, DecodeMode::Eager, 3);
  EXPECT_EQ(step.rows(), 3);
  for (int32_t t = 0; t < 4; ++t) {
    std::vector<DecodeRow> rows;
    for (size_t i = 0; i < prompts.size(); ++i)
      rows.push_back({static_cast<int32_t>(100 + 7 * t + i), positions[i] + t, cache_rows[i]});
    const Tensor logits = step.run_rows(rows).to(Device::cpu());
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Tensor expected =
          decode_cached(model, Tensor::from_ints({rows[i].token}, Shape{1, 1}), alone[i]).to(Device::cpu());
      EXPECT_EQ(to_float_vector(logits.narrow(0, static_cast<int64_t>(i), 1)), to_float_vector(expected))
          << what << ": sequence " << i << ", step " << t;
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int64_t length = positions[i] + 4;
    EXPECT_EQ(to_float_vector(pool.keys(1).narrow(0, cache_rows[i], 1).narrow(1, 0, length).contiguous()),
              to_float_vector(alone[i].keys(1).narrow(1, 0, length).contiguous()))
        << what << ": keys of sequence " << i;
  }
  expect_error([&] { step.run_rows(std::vector<DecodeRow>{{1, 0, 0}}); }, {"1 rows for a step of 3"});
  expect_error(
      [&] {
        step.run_rows(std::vector<DecodeRow>{{1, 0, 0}, {1, 16, 1}, {1, 0, 3}});
      },
      {"position 16", "16 tokens"});
  expect_error([&] { step.run_rows(std::vector<DecodeRow>{{1, 0, 0}, {1, 0, 4}, {1, 0, 3}}); }, {"cache row 4"});
}

TEST(Qwen3DecodeStep, RowsAtTheirOwnPositionsEqualEachSequenceAlone) {
  check_rows_against_alone(Qwen3Model::load(tiny_model_dir(true)), "dense, tied");
  TempDir dir;
  check_rows_against_alone(Qwen3Model::load(quantize_tiny_modelopt(dir, false, /*quantize_lm_head=*/true)), "NVFP4");
}

TEST(Qwen3DecodeStep, FullCacheAndBadInputAreErrors) {
  const Qwen3Model model = Qwen3Model::load(tiny_model_dir(false));
  KVCache cache = model.make_cache(1, 3);
  Qwen3DecodeStep step(model, cache, DecodeMode::Eager);
  for (int32_t id : {1, 2, 3}) step.run(std::vector<int32_t>{id});
  expect_error([&] { step.run(std::vector<int32_t>{4}); }, {"maximum of 3 tokens"});
  EXPECT_EQ(cache.length(), 3);
  cache.set_length(1);
  expect_error([&] { step.run(std::vector<int32_t>{1, 2}); }, {"2 ids for a cache of 1 rows"});
  expect_error([&] { step.run(std::vector<int32_t>{-1}); }, {"outside the vocabulary"});
  EXPECT_EQ(cache.length(), 1);
}

TEST(Qwen3DecodeStep, CudaGraphModeNeedsACudaModel) {
  const Qwen3Model model = Qwen3Model::load(tiny_model_dir(false));
  KVCache cache = model.make_cache(1, 8);
  expect_error([&] { Qwen3DecodeStep step(model, cache, DecodeMode::Graph); }, {"--cuda-graph"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_decode_step
