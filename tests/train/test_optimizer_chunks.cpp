// --step-chunk-rows (Optimizer::set_chunk_rows): an update made a few rows at a time writes the same bits as the
// whole update, for AdamW and AdamW8bit (whose chunks are rounded up to whole moment blocks), F32 and BF16 masters
// (stochastic rounding draws by the element's index in the whole parameter), over three steps.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "common/test_util.h"
#include "core/numeric.h"
#include "train/optim/optimizer.h"

namespace nvfp4lm::test_optimizer_chunks {
namespace {

std::vector<Parameter> make_parameters(DType master) {
  Rng rng(7);
  std::vector<Parameter> params;
  for (const Shape& shape : {Shape{33, 65}, Shape{7, 300}, Shape{1000}}) {
    Parameter p;
    p.name = fmt::format("p{}", params.size());
    p.value = Tensor::empty(shape, master);
    convert_cpu(test::random_normal(shape, rng, 0.5f), p.value);
    p.grad = Tensor::zeros(shape, DType::F32);
    p.weight_decay = true;
    params.push_back(std::move(p));
  }
  return params;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(OptimizerChunks, ChunkedUpdatesWriteTheBitsOfWholeOnes) {
  for (const char* kind : {"adamw", "adamw8bit"}) {
    for (DType master : {DType::F32, DType::BF16}) {
      for (int64_t chunk_rows : {1, 3, 8}) {
        SCOPED_TRACE(fmt::format("{} {} masters, {} rows a chunk", kind, dtype_name(master), chunk_rows));
        std::vector<Parameter> whole = make_parameters(master), chunked = make_parameters(master);
        AdamWOptions options;
        options.seed = 99;
        const std::unique_ptr<Optimizer> a = make_optimizer(kind, whole, options);
        const std::unique_ptr<Optimizer> b = make_optimizer(kind, chunked, options);
        b->set_chunk_rows(chunk_rows);
        const Tensor start = whole[0].value.clone();
        Rng rng(3);
        for (int step = 0; step < 3; ++step) {
          for (size_t k = 0; k < whole.size(); ++k) {
            const Tensor grad = test::random_normal(whole[k].grad.shape(), rng, 0.1f);
            whole[k].grad.copy_from(grad);
            chunked[k].grad.copy_from(grad);
          }
          a->step(whole, 1e-2, 0.7f);
          b->step(chunked, 1e-2, 0.7f);
        }
        for (size_t k = 0; k < whole.size(); ++k) EXPECT_TRUE(same_bytes(whole[k].value, chunked[k].value)) << k;
        const std::vector<NamedTensor> state_a = a->state_tensors(), state_b = b->state_tensors();
        ASSERT_EQ(state_a.size(), state_b.size());
        for (size_t k = 0; k < state_a.size(); ++k)
          EXPECT_TRUE(same_bytes(state_a[k].tensor, state_b[k].tensor)) << state_a[k].name;
        EXPECT_FALSE(same_bytes(start, whole[0].value)) << "the masters did not move: the comparison is vacuous";
      }
    }
  }
}

TEST(OptimizerChunks, ANegativeChunkIsAnError) {
  std::vector<Parameter> params = make_parameters(DType::F32);
  const std::unique_ptr<Optimizer> optimizer = make_optimizer("adamw", params, {});
  test::expect_error([&] { optimizer->set_chunk_rows(-1); }, {"--step-chunk-rows", "-1"});
}

}  // namespace
}  // namespace nvfp4lm::test_optimizer_chunks
