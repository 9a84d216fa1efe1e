// A compressed-tensors NVFP4 checkpoint (io/compressed_tensors.h) runs as the same model as its ModelOpt form: the
// tiny fixture quantized (W4A16, and W4A4 with fixed input scales), copied to compressed-tensors and from there to
// ModelOpt again gives the same logits bit for bit, and so does the original ModelOpt export: every tensor scale
// nvfp4lm chooses reads back through the format's reciprocal (quant/nvfp4_block.h). A ModelOpt checkpoint from
// elsewhere may hold a scale that no float's reciprocal reaches: that one moves one ulp, within float32 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "io/model_copy.h"
#include "io/safetensors_reader.h"
#include "model/model_test_util.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test::test_compressed_tensors_model {
namespace {

bool same_logits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

void expect_same_model(const fs::path& modelopt, const TempDir& dir, const std::string& what,
                       size_t expected_moved = 0) {
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
  EXPECT_EQ(moved, expected_moved);
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

// The fixture's ModelOpt export with q_proj's weight_scale_2 of layer 0 moved, one ulp at a time, to a float that no
// float's reciprocal reaches (as ModelOpt's own amax / (6 * 448) can give), written in place: copied to
// compressed-tensors, that scale alone moves one ulp; the model stays within float32 rounding of the original.
TEST(CompressedTensorsModel, AModeloptScaleNoReciprocalReachesMovesOneUlp) {
  TempDir dir;
  const fs::path modelopt = quantize_tiny_modelopt(dir, false);
  const fs::path file = modelopt / "model.safetensors";
  uint64_t offset = 0;
  float scale = 0;
  {
    const auto reader = SafetensorsFile::open(file);
    const SafetensorsEntry* entry = reader->find("model.layers.0.self_attn.q_proj.weight_scale_2");
    ASSERT_NE(entry, nullptr) << file;
    offset = entry->offset;
    std::memcpy(&scale, reader->bytes_of(*entry), sizeof scale);
  }
  ASSERT_EQ(1.0f / (1.0f / scale), scale);  // nvfp4lm's own scale reads back
  do scale = std::nextafter(scale, INFINITY);
  while (1.0f / (1.0f / scale) == scale);
  {
    std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
    stream.seekp(static_cast<std::streamoff>(offset));
    stream.write(reinterpret_cast<const char*>(&scale), sizeof scale);
    ASSERT_TRUE(stream) << file;
  }
  ASSERT_EQ(open_model(modelopt)->load("model.layers.0.self_attn.q_proj.weight").nvfp4.tensor_scale, scale);
  TempDir work;
  expect_same_model(modelopt, work, "a ModelOpt scale no reciprocal reaches", 1);
}

}  // namespace
}  // namespace nvfp4lm::test::test_compressed_tensors_model
