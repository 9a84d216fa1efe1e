// Embedding: gather vs direct indexing, bad ids are user-facing Errors, the backward scatter-add (repeated ids,
// += into an existing gradient, strided rows) vs a direct sum.
#include <gtest/gtest.h>

#include "ops/embedding.h"
#include "ops_testing.h"

namespace nvfp4lm::test_embedding {
namespace {

TEST(Embedding, ForwardGathersRows) {
  Rng rng(10);
  const int64_t vocab = 11, hidden = 7;
  Tensor table = test::random_normal({vocab, hidden}, rng);
  Tensor ids = Tensor::from_ints({3, 0, 10, 3, 5, 9}, {2, 3});
  Tensor out = test::strided_copy(Tensor::zeros({2, 3, hidden}, DType::F32), 2, 1);  // strided rows
  embedding_forward(ids, table, out);
  const std::vector<float> t = to_float_vector(table), o = to_float_vector(out);
  const std::vector<int32_t> id{3, 0, 10, 3, 5, 9};
  for (size_t i = 0; i < id.size(); ++i)
    for (int64_t j = 0; j < hidden; ++j)
      EXPECT_EQ(o[i * hidden + static_cast<size_t>(j)], t[static_cast<size_t>(id[i] * hidden + j)]);
}

TEST(Embedding, OutOfRangeIdsAreErrorsNamingThePosition) {
  Tensor table = Tensor::zeros({4, 3}, DType::F32);
  Tensor out = Tensor::empty({2, 3}, DType::F32);
  for (int32_t bad : {-1, 4}) {
    Tensor ids = Tensor::from_ints({1, bad}, {2});
    try {
      embedding_forward(ids, table, out);
      ADD_FAILURE() << "id " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("position 1"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
    }
    Tensor dtable = Tensor::zeros({4, 3}, DType::F32);
    EXPECT_THROW(embedding_backward(ids, out, dtable), Error);
  }
}

TEST(Embedding, BackwardAccumulatesRepeatedIds) {
  Rng rng(11);
  // Big enough to take the parallel path (column slices), odd hidden size.
  const int64_t vocab = 37, hidden = 193, tokens = 400;
  std::vector<int32_t> id(tokens);
  for (auto& v : id) v = static_cast<int32_t>(rng.below(vocab / 3));  // many repeats
  Tensor ids = Tensor::from_ints(id, {tokens});
  Tensor dout = test::strided_copy(test::random_normal({tokens, hidden}, rng), 3, 3);
  Tensor dtable = test::random_normal({vocab, hidden}, rng);
  std::vector<double> expected = test::to_doubles(dtable);
  const std::vector<double> d = test::to_doubles(dout);
  for (int64_t i = 0; i < tokens; ++i)
    for (int64_t j = 0; j < hidden; ++j)
      expected[static_cast<size_t>(id[static_cast<size_t>(i)] * hidden + j)] += d[static_cast<size_t>(i * hidden + j)];
  embedding_backward(ids, dout, dtable);
  test::expect_near_doubles(dtable, expected, test::kForwardTol, "dtable");
}

}  // namespace
}  // namespace nvfp4lm::test_embedding
