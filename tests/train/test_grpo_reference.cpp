// GRPO's reference (train/grpo_reference.h): its per-token log-probabilities against log softmax in double over the
// inference model's logits of the whole rows, laid out as completion_batch's targets; it stays the starting model
// while the policy moves (full-parameter: a copy; LoRA: the base rows of the inference model, adapters ignored).
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "io/model_files.h"
#include "ops/cross_entropy.h"
#include "train/grpo.h"
#include "train/grpo_reference.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_grpo_reference {
namespace {

struct Rows {
  std::vector<std::vector<int32_t>> prompts = {{5, 9, 12, 7}, {30, 4}, {8, 8, 8}};
  std::vector<Completion> completions = {{{40, 41, 42}, "", true, std::nullopt},
                                         {{50, 51, 52, 53, 54}, "", false, std::nullopt},
                                         {{60}, "", true, std::nullopt}};
  std::vector<const std::vector<int32_t>*> prompt_rows() const { return {&prompts[0], &prompts[1], &prompts[2]}; }
  std::vector<const Completion*> completion_rows() const { return {&completions[0], &completions[1], &completions[2]}; }
  TrainBatch batch() const { return completion_batch(prompt_rows(), completion_rows(), {1.0f, -1.0f, 0.5f}, 0); }
};

// log softmax(logits)[target] at each scored position of `batch`, in double, from `model`'s logits of the whole rows
// (each row alone: no padding in its context); 0 elsewhere.
std::vector<double> float64_logps(const Qwen3Model& model, const TrainBatch& batch, const Rows& rows) {
  const int64_t width = batch.ids.dim(1);
  std::vector<double> out(static_cast<size_t>(batch.ids.numel()), 0.0);
  for (size_t r = 0; r < rows.prompts.size(); ++r) {
    std::vector<int32_t> ids = rows.prompts[r];
    ids.insert(ids.end(), rows.completions[r].tokens.begin(), rows.completions[r].tokens.end());
    const auto length = static_cast<int64_t>(ids.size());
    const Tensor logits = model.forward(Tensor::from_ints(ids, Shape{1, length}));
    const int64_t vocab = logits.dim(2);
    for (int64_t p = 0; p < length; ++p) {
      const int32_t target = batch.targets.data<int32_t>()[static_cast<int64_t>(r) * width + p];
      if (target == kIgnoreIndex) continue;
      const float* z = logits.data<float>() + p * vocab;
      const double max = *std::max_element(z, z + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(z[v]) - max);
      out[static_cast<size_t>(static_cast<int64_t>(r) * width + p)] = z[target] - max - std::log(sum);
    }
  }
  return out;
}

void expect_near(const std::vector<float>& got, const std::vector<double>& expected, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  int scored = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], tolerance) << what << " at " << i;
    scored += expected[i] != 0.0 ? 1 : 0;
  }
  EXPECT_EQ(scored, 3 + 5 + 1) << what;
}

// Moves every parameter: the policy is no longer the start.
void perturb(Qwen3Trainable& model) {
  Rng rng(3);
  for (const Parameter& p : model.parameters()) {
    Tensor value = p.value;  // a handle to the parameter's storage
    if (value.rank() == 2) value.copy_from(test::random_normal(value.shape(), rng, 0.2f));
  }
  model.refresh_quantized();
}

TEST(GrpoReference, FullParameterTheLogProbabilitiesOfTheStartingForwardWeightsStayThem) {
  TrainModelOptions options;
  options.qat = QatMode::W4A16;
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_model(test::tiny_model_dir()), options);
  const Rows rows;
  const TrainBatch batch = rows.batch();
  const int64_t width = batch.ids.dim(1);
  const std::vector<double> start = float64_logps(model.inference_model(), batch, rows);
  const Qwen3Model reference = frozen_reference(model);
  expect_near(reference_token_logps(reference, rows.prompt_rows(), rows.completion_rows(), width), start, 2e-5,
              "at the start");
  perturb(model);
  const std::vector<double> moved = float64_logps(model.inference_model(), batch, rows);
  EXPECT_GT(std::fabs(moved[3] - start[3]), 1e-3) << "the perturbation moved the policy";
  expect_near(reference_token_logps(reference, rows.prompt_rows(), rows.completion_rows(), width), start, 2e-5,
              "after the policy moved");
}

TEST(GrpoReference, LoraTheBaseWithoutAdaptersIsTheReference) {
  TrainModelOptions options;
  options.qat = QatMode::W4A16;
  options.lora.rank = 4;
  options.lora.alpha = 8;
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_model(test::tiny_model_dir()), options);
  TrainModelOptions full;
  full.qat = QatMode::W4A16;
  Qwen3Trainable base = Qwen3Trainable::from_files(*open_model(test::tiny_model_dir()), full);
  const Rows rows;
  const TrainBatch batch = rows.batch();
  const std::vector<double> expected = float64_logps(base.inference_model(), batch, rows);
  const Qwen3Model reference = frozen_reference(model);
  perturb(model);  // the adapters move; the reference reads the base rows only
  expect_near(reference_token_logps(reference, rows.prompt_rows(), rows.completion_rows(), batch.ids.dim(1)), expected,
              2e-5, "LoRA");
}

}  // namespace
}  // namespace nvfp4lm::test_grpo_reference
