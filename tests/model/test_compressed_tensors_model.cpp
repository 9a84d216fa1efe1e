// A compressed-tensors NVFP4 checkpoint (io/compressed_tensors.h) runs as the same model as its ModelOpt form: the
// tiny fixture quantized (W4A16, and W4A4 with fixed input scales), copied to compressed-tensors and from there to
// ModelOpt again gives the same logits bit for bit; against the original ModelOpt export the logits are identical
// when every tensor scale is a float's reciprocal, and within float32 rounding otherwise (the format stores 1/x).
#include <gtest/gtest.h>

#include "io/model_copy.h"
#include "model/model_test_util.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test {
namespace {

bool same_logits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

void expect_same_model(const fs::path& modelopt, const TempDir& dir, const std::string& what) {
  SCOPED_TRACE(what);
  const auto source = open_model(modelopt);
  write_model_copy(*source, dir / "ct", ModelFormat::CompressedTensorsNvfp4);
  const auto ct = open_model(dir / "ct");
  ASSERT_EQ(ct->format(), ModelFormat::CompressedTensorsNvfp4);
  write_model_copy(*ct, dir / "ct-as-modelopt", ModelFormat::ModeloptNvfp4);

  const Tensor ids = Tensor::from_ints({1, 17, 90, 3, 250, 8, 77, 400, 5, 12, 301, 64}, {2, 6});
  const Tensor ct_logits = Qwen3Model::load(dir / "ct").forward(ids);
  const Tensor back_logits = Qwen3Model::load(dir / "ct-as-modelopt").forward(ids);
  EXPECT_TRUE(same_logits(ct_logits, back_logits)) << "the compressed-tensors weights as ModelOpt";

  const Tensor original = Qwen3Model::load(modelopt).forward(ids);
  const size_t moved = scales_moved_by_copy(*source, ModelFormat::CompressedTensorsNvfp4);
  if (moved == 0) {
    EXPECT_TRUE(same_logits(ct_logits, original));
  } else {
    expect_rel_close(ct_logits, original, 1e-5, what + ": " + std::to_string(moved) + " tensor scales moved by 1 ulp");
  }
}

TEST(CompressedTensorsModel, RunsAsItsModeloptForm) {
  for (const bool tied : {false, true}) {
    TempDir dir;
    expect_same_model(quantize_tiny_modelopt(dir, tied), dir, tied ? "tied W4A16" : "W4A16");
  }
  TempDir dir;
  const fs::path w4a4 = quantize_tiny_w4a4(dir, false);
  expect_same_model(w4a4, dir, "W4A4");
  // The W4A4 copy keeps its activation scales (input_global_scale), so it runs W4A4.
  const auto ct = open_model(dir / "ct");
  const ModelWeight q_proj = ct->load("model.layers.0.self_attn.q_proj.weight");
  EXPECT_GT(q_proj.input_scale, 0.0f);
  EXPECT_EQ(q_proj.input_scale, open_model(w4a4)->load("model.layers.0.self_attn.q_proj.weight").input_scale);
}

}  // namespace
}  // namespace nvfp4lm::test
