// What the CUDA twins promise beyond matching the CPU numbers (test_backend_ops.cpp does that):
//  - bad data (token ids, positions, targets) becomes an Error: at once where the op synchronises anyway
//    (embedding backward, cross-entropy), at the next call where the kernel found it (embedding forward, RoPE),
//    and never an out-of-bounds access;
//  - the reductions that feed parameter gradients and norms are bitwise reproducible run to run, and the
//    embedding backward with F32 gradients is bitwise the CPU's;
//  - exact ties are broken as the CPU reference breaks them (the cross-entropy's argmax takes the first maximal
//    id, like torch.argmax), wherever in the row, the warp or the block the tied values sit.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "backend_harness.h"
#include "core/cuda/runtime.h"
#include "ops/cross_entropy.h"
#include "ops/cuda/input_errors.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"

namespace nvfp4lm::test::backend::test_cuda_op_contracts {
namespace {

// Runs `call`, expecting an Error whose message contains `fragment`.
template <typename F>
void expect_error(F&& call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "expected an Error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

std::vector<uint32_t> bits(const std::vector<float>& values) {
  std::vector<uint32_t> out(values.size());
  std::memcpy(out.data(), values.data(), values.size() * sizeof(float));
  return out;
}

TEST(CudaOpContracts, EmbeddingForwardReportsABadIdAtTheNextCall) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(1);
  const Tensor table = upload(random_normal({10, 64}, rng), DType::BF16);
  Tensor out = Tensor::empty({3, 64}, DType::BF16, gpu());
  embedding_forward(Tensor::from_ints({1, 12, 3}, {3}).to(gpu()), table, out);  // does not synchronise
  cuda::synchronize();
  const std::vector<float> rows = download(out);
  for (int64_t j = 0; j < 64; ++j) EXPECT_EQ(rows[static_cast<size_t>(64 + j)], 0.f) << "the bad id's row is zero";
  const Tensor good = Tensor::from_ints({1, 2, 3}, {3}).to(gpu());
  expect_error([&] { embedding_forward(good, table, out); }, "token id 12 at position 1");
  embedding_forward(good, table, out);  // reported once
  cuda::synchronize();
  EXPECT_NO_THROW(cuda::throw_pending_input_errors());
}

TEST(CudaOpContracts, EmbeddingBackwardRejectsBadIdsBeforeTouchingTheGradient) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Tensor dtable = Tensor::zeros({10, 16}, DType::F32, gpu());
  const Tensor dout = upload(full({2, 16}, 1.f), DType::BF16);
  expect_error(
      [&] {
        embedding_backward(Tensor::from_ints({0, -1}, {2}).to(gpu()), dout, dtable);
      },
      "token id -1 at position 1");
  for (float v : download(dtable)) ASSERT_EQ(v, 0.f);
}

TEST(CudaOpContracts, RopeReportsAPositionOutsideTheTableAtTheNextCall) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(2);
  const RopeTable table(64, 1e6f, 8, gpu());
  const Tensor x0 = round_to(random_normal({2, 2, 64}, rng), DType::BF16);
  Tensor x = upload(x0, DType::BF16);
  rope_forward(x, Tensor::from_ints({3, 9}, {2}).to(gpu()), table);
  cuda::synchronize();
  const std::vector<float> after = download(x), before = values(x0);
  for (size_t i = 128; i < 256; ++i) EXPECT_EQ(after[i], before[i]) << "the bad token is left alone";
  expect_error([&] { rope_forward(x, Tensor::from_ints({1, 2}, {2}).to(gpu()), table); }, "position 9 of token 1");
}

TEST(CudaOpContracts, CrossEntropyRejectsATargetOutsideTheVocabulary) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(3);
  const Tensor hidden = upload(random_normal({2, 64}, rng), DType::BF16);
  const Tensor head = upload(random_normal({10, 64}, rng), DType::BF16);
  expect_error(
      [&] {
        lm_head_cross_entropy(hidden, head, Tensor::from_ints({5, 10}, {2}).to(gpu()), 1.f, nullptr, nullptr);
      },
      "target token 10 at position 1");
}

TEST(CudaOpContracts, ABadIdFromTheForwardFailsTheStepAtItsLoss) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(4);
  const Tensor table = upload(random_normal({10, 64}, rng), DType::BF16);
  Tensor x = Tensor::empty({2, 64}, DType::BF16, gpu());
  embedding_forward(Tensor::from_ints({4, 10}, {2}).to(gpu()), table, x);
  expect_error(
      [&] {
        lm_head_cross_entropy(x, table, Tensor::from_ints({1, 2}, {2}).to(gpu()), 1.f, nullptr, nullptr);
      },
      "token id 10 at position 1");
}

TEST(CudaOpContracts, RmsNormWeightGradientIsBitwiseReproducible) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(5);
  const int64_t rows = 8192, dim = 2560;
  const Tensor x = upload(random_normal({rows, dim}, rng), DType::BF16);
  const Tensor dy = upload(random_normal({rows, dim}, rng), DType::BF16);
  const Tensor w = random_normal({dim}, rng).to(gpu());
  Tensor y = Tensor::empty({rows, dim}, DType::BF16, gpu()), rstd = Tensor::empty({rows}, DType::F32, gpu());
  rmsnorm_forward(x, w, 1e-6f, y, &rstd);
  std::vector<uint32_t> first;
  for (int run = 0; run < 2; ++run) {
    Tensor dx = Tensor::empty({rows, dim}, DType::BF16, gpu()), dw = Tensor::zeros({dim}, DType::F32, gpu());
    rmsnorm_backward(dy, x, w, rstd, dx, dw);
    const std::vector<uint32_t> got = bits(download(dw));
    if (run == 0)
      first = got;
    else
      EXPECT_EQ(got, first);
  }
}

TEST(CudaOpContracts, SumSquaresIsBitwiseReproducible) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(6);
  const Tensor a = upload(random_normal({3000, 2561}, rng), DType::F32);
  const double first = sum_squares(a);
  EXPECT_EQ(sum_squares(a), first);
  EXPECT_EQ(sum_squares(a), first);
}

TEST(CudaOpContracts, EmbeddingBackwardWithF32GradientsIsBitwiseTheCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(7);
  const int64_t count = 300, vocab = 50, hidden = 128;
  std::vector<int32_t> id(static_cast<size_t>(count));
  for (auto& v : id) v = static_cast<int32_t>(rng.below(7));  // many repeats: the summation order matters
  const Tensor ids = Tensor::from_ints(id, {count});
  const Tensor dout = random_normal({count, hidden}, rng);
  Tensor expected = random_normal({vocab, hidden}, rng);
  Tensor dtable = expected.to(gpu());
  embedding_backward(ids, dout, expected);
  embedding_backward(ids.to(gpu()), dout.to(gpu()), dtable);
  EXPECT_EQ(bits(download(dtable)), bits(values(expected)));
}

TEST(CudaOpContracts, CrossEntropyIsBitwiseReproducible) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(8);
  const int64_t rows = 300, hidden_dim = 256, vocab = 5000;
  const Tensor h = upload(random_normal({rows, hidden_dim}, rng), DType::BF16);
  const Tensor w = upload(random_normal({vocab, hidden_dim}, rng, 0.0625f), DType::BF16);
  std::vector<int32_t> target(static_cast<size_t>(rows));
  for (auto& t : target) t = rng.uniform() < 0.3f ? kIgnoreIndex : static_cast<int32_t>(rng.below(vocab));
  const Tensor targets = Tensor::from_ints(target, {rows}).to(gpu());
  CrossEntropyResult first_result;
  std::vector<uint32_t> first_dh, first_dw;
  for (int run = 0; run < 2; ++run) {
    Tensor dh = Tensor::empty({rows, hidden_dim}, DType::BF16, gpu());
    Tensor dw = Tensor::zeros({vocab, hidden_dim}, DType::F32, gpu());
    const CrossEntropyResult result = lm_head_cross_entropy(h, w, targets, 1.f / 200.f, &dh, &dw);
    if (run == 0) {
      first_result = result;
      first_dh = bits(download(dh));
      first_dw = bits(download(dw));
      continue;
    }
    EXPECT_EQ(result.loss_sum, first_result.loss_sum);
    EXPECT_EQ(result.correct, first_result.correct);
    EXPECT_EQ(result.tokens, first_result.tokens);
    EXPECT_EQ(bits(download(dh)), first_dh);
    EXPECT_EQ(bits(download(dw)), first_dw);
  }
}

TEST(CudaOpContracts, CrossEntropyArgmaxTakesTheFirstOfTiedMaxima) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(9);
  const int64_t hidden_dim = 64, vocab = 5000;
  // Pairs of lm_head rows made identical, so their logits tie: in one chunk of one thread (16, 17), in two warps of
  // the row kernel (40, 1800: threads 5 and 225), in two passes of its column loop (8, 4104: the same thread), and
  // at the row's end (2000, 4999). Weights are multiples of 1/16 and hidden values small integers, so every logit is
  // exact in fp32 and BF16 in any summation order: the ties are exact on every backend.
  const std::pair<int32_t, int32_t> pairs[] = {{16, 17}, {40, 1800}, {8, 4104}, {2000, 4999}};
  auto sixteenths = [&](float scale) { return std::round(rng.normal() * scale * 16.f) / 16.f; };
  Tensor w = Tensor::empty({vocab, hidden_dim}, DType::F32);
  Tensor h = Tensor::empty({3 * 4, hidden_dim}, DType::F32);
  float* wp = w.data<float>();
  float* hp = h.data<float>();
  for (int64_t i = 0; i < vocab * hidden_dim; ++i) wp[i] = sixteenths(0.125f);
  std::vector<int32_t> target;
  for (int p = 0; p < 4; ++p) {
    const auto [first, second] = pairs[p];
    for (int64_t k = 0; k < hidden_dim; ++k)
      wp[second * hidden_dim + k] = wp[first * hidden_dim + k] = sixteenths(0.25f);
    // Three rows aimed at the pair (logit ~ 64 there, < 20 elsewhere): two target the first id (correct, as
    // torch.argmax counts it), one the second (not correct); taking the last of the tied ids would count 1, not 2.
    for (int row = 3 * p; row < 3 * p + 3; ++row) {
      for (int64_t k = 0; k < hidden_dim; ++k) hp[row * hidden_dim + k] = 16.f * wp[first * hidden_dim + k];
      target.push_back(row % 3 == 2 ? second : first);
    }
  }
  const Tensor targets = Tensor::from_ints(target, {12});
  const CrossEntropyResult cpu = lm_head_cross_entropy(h, w, targets, 1.f, nullptr, nullptr);
  EXPECT_EQ(cpu.correct, 8);
  for (const DType dtype : {DType::F32, DType::BF16}) {
    const CrossEntropyResult gpu_result =
        lm_head_cross_entropy(upload(h, dtype), upload(w, dtype), targets.to(gpu()), 1.f, nullptr, nullptr);
    EXPECT_EQ(gpu_result.correct, 8) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace nvfp4lm::test::backend::test_cuda_op_contracts
