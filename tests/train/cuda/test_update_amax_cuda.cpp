// The optimizer's amaxes and the QAT refresh on the GPU (the kernels' side of tests/train/test_update_amax.cpp;
// tests/train/cuda/test_optim_cuda.cpp compares each amax with the CPU's): after a step the forward weights the
// refresh wrote with the update's amaxes are the bytes of a refresh that measures every amax, for fp32 masters
// (apply_update), bf16 masters with stochastic rounding in chunks, the low-memory recipe (bf16 masters, 8-bit
// moments, recompute, packed weights, the fused update) whole and chunked, and 16x16 tiles with a quantized tied
// head. Skipped without a GPU.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "train/update_refresh_support.h"

namespace nvfp4lm::test::test_update_amax_cuda {
namespace {

TEST(UpdateAmaxCuda, RefreshWritesTheForwardWeightsOfAMeasuringRefresh) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const std::unique_ptr<ModelFiles> untied = random_model_files(small_config(false), "untied", 1);
  const std::unique_ptr<ModelFiles> tied = random_model_files(small_config(true), "tied", 2);
  TrainModelOptions fp32{QatMode::W4A16};
  fp32.device = Device::cuda(0);
  TrainModelOptions bf16 = fp32;
  bf16.bf16_master = true;
  TrainModelOptions low_memory = bf16;
  low_memory.recompute = Recompute::Block;
  low_memory.packed_weights = true;
  TrainModelOptions tiles = fp32;
  tiles.block = Nvfp4Block::Tile16x16;
  tiles.quantize_lm_head = true;
  using enum UpdateForm;
  const std::pair<const ModelFiles*, UpdateCase> cases[] = {
      {untied.get(), {"fp32 adamw, apply_update", fp32, "adamw", 0, ApplyUpdate}},
      {untied.get(), {"bf16 adamw, chunked", bf16, "adamw", 3, StepAndRefresh}},
      {tied.get(), {"low-memory recipe, fused", low_memory, "adamw8bit", 0, Fused}},
      {tied.get(), {"low-memory recipe, fused and chunked", low_memory, "adamw8bit", 3, Fused}},
      {tied.get(), {"16x16 tiles, quantized tied head", tiles, "adamw8bit", 0, StepAndRefresh}},
  };
  for (const auto& [files, c] : cases) expect_refresh_equals_measuring_refresh(*files, c);
}

}  // namespace
}  // namespace nvfp4lm::test::test_update_amax_cuda
