// What Qwen3Model::precision() says about the weights it reads: a BF16 embedding is kept as stored on the CPU and
// read as the lm_head when tied, but a lm_head quantized on its own (quantize --quantize-lm-head) is NVFP4, and the
// diagnostics line of every command must say which (bench infer's byte count depends on it).
#include <gtest/gtest.h>

#include "io/io_test_util.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test::test_qwen3_precision {
namespace {

TEST(Qwen3Precision, NamesTheLmHeadFormatBesideTheBf16Embedding) {
  TempDir dir;
  const fs::path bf16 = synth_small(dir, "bf16", /*tied=*/true);
  for (const bool quantize_lm_head : {false, true}) {
    QuantizeOptions options;
    options.quantize_lm_head = quantize_lm_head;
    const fs::path out = dir / (quantize_lm_head ? "nvfp4-lm-head" : "nvfp4");
    quantize_model(*open_model(bf16), out, options);
    const Qwen3Model model = Qwen3Model::load(out);
    ASSERT_EQ(model.weights().embed_tokens.dtype(), DType::BF16);
    EXPECT_EQ(model.weights().lm_head.is_nvfp4(), quantize_lm_head);
    EXPECT_EQ(model.precision(), quantize_lm_head ? "fp32 (weights NVFP4, embedding BF16, lm_head NVFP4)"
                                                  : "fp32 (weights NVFP4, embedding / lm_head BF16)");
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_precision
