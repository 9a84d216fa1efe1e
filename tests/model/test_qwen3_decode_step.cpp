// Qwen3DecodeStep (model/qwen3_decode_step.h) on the CPU, in its eager form: the fixed-buffer decode step (cache
// slots and attention starts read from the positions tensor) gives exactly the logits of forward_cached, for dense
// and NVFP4 models, tied and untied, two cache rows; after the cache is truncated (a chat turn that rewinds) it
// continues from the right place; a full cache is the same Error as forward_cached; Graph mode needs CUDA.
// The CUDA graph itself is tested in tests/model/cuda/test_qwen3_cuda.cpp.
#include <gtest/gtest.h>

#include "model/model_test_util.h"
#include "model/qwen3_decode_step.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test {
namespace {

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
    const Tensor expected = model.forward_cached(ids.narrow(1, t, 1).contiguous(), reference);
    const Tensor& actual = step.run(ids_at(ids, t));
    ASSERT_EQ(actual.shape(), expected.shape()) << what;
    EXPECT_EQ(to_float_vector(actual), to_float_vector(expected)) << what << ": step at position " << t;
    EXPECT_EQ(cache.length(), t + 1);
  }
  // Rewind both to 6 tokens (a chat turn that keeps a common prefix) and go on with other tokens.
  reference.set_length(6);
  cache.set_length(6);
  for (int64_t t = 0; t < 3; ++t) {
    const Tensor expected = model.forward_cached(ids.narrow(1, t, 1).contiguous(), reference);
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
}  // namespace nvfp4lm::test
