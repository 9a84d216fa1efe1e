// Qwen3Model::forward_last (the logits of the last positions only) against forward's last rows, for batches of one
// and two rows; and a model loaded with dequantize_nvfp4 (cpu/dense) against the packed NVFP4 model it came from.
#include <gtest/gtest.h>

#include "model/qwen3_model.h"
#include "model_test_util.h"

namespace nvfp4lm::test::test_qwen3_forward_last {
namespace {

TEST(Qwen3ForwardLast, EqualsTheLastRowsOfTheFullForward) {
  const Reference ref(false);
  const Qwen3Model model = Qwen3Model::load(tiny_model_dir(false));
  const Tensor ids = ref.get("input_ids");  // [B, T]
  const int64_t tokens = ids.dim(1);
  const Tensor full = model.forward(ids);
  for (const int64_t last : {int64_t{1}, int64_t{3}, tokens}) {
    const Tensor tail = model.forward_last(ids, last);
    ASSERT_EQ(tail.shape(), (Shape{ids.dim(0), last, model.config().vocab_size}));
    expect_close(tail, full.narrow(1, tokens - last, last).contiguous(), kF32Tol,
                 "forward_last " + std::to_string(last));
  }
  const Tensor one_row = ids.narrow(0, 1, 1).contiguous();
  expect_close(model.forward_last(one_row, 2), model.forward(one_row).narrow(1, tokens - 2, 2).contiguous(), kF32Tol,
               "forward_last of one row");
  expect_error([&] { model.forward_last(ids, 0); }, {"forward_last"});
  expect_error([&] { model.forward_last(ids, tokens + 1); }, {"forward_last"});
}

TEST(Qwen3ForwardLast, DequantizedWeightsRunDenseWithTheSameLogits) {
  TempDir dir;
  const fs::path nvfp4 = quantize_tiny_modelopt(dir, false, /*quantize_lm_head=*/true);
  const Qwen3Model packed = Qwen3Model::load(nvfp4);
  ModelOptions options;
  options.dequantize_nvfp4 = true;
  const Qwen3Model dense = Qwen3Model::load(nvfp4, options);
  EXPECT_EQ(packed.compute_path(), "cpu/dequant-gemm");
  EXPECT_EQ(dense.compute_path(), "cpu/dense");
  EXPECT_EQ(dense.precision(), "fp32 (weights dense F32)");
  EXPECT_FALSE(dense.weights().any_nvfp4());
  const Reference ref(false);
  expect_close(dense.forward(ref.get("input_ids")), packed.forward(ref.get("input_ids")), kF32Tol,
               "dense vs packed NVFP4");
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_forward_last
