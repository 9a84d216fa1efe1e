// `train --objective grpo` on a CUDA device (the emulated one in CI): the rollouts run through the batch decode engine
// over the BF16 forward weights on the GPU and the policy-gradient loss head through the CUDA cross-entropy with
// per-token scales; a short run of the tiny fixture model learns the tools test's preference (the answer starts with
// a digit) as the CPU run does. The completions themselves differ from the CPU's (bf16 logits sample other tokens), so
// the check is the reward, not the bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "common/test_util.h"
#include "tools/grpo_rollouts.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_grpo_cuda {
namespace {

// A GRPO run of the tiny fixture model on the GPU over `count` prompts, rewarded for a digit anywhere.
TrainOptions grpo_cuda_options(const test::TempDir& dir, int count) {
  std::string prompts;
  for (int i = 0; i < count; ++i)
    prompts += nlohmann::json{{"prompt", fmt::format("What is {} plus {}?", 2 + i % 8, 3 + i / 8)}}.dump() + "\n";
  test::write_file(dir / "prompts.jsonl", prompts);
  TrainOptions options = test::tiny_train_options(dir / "prompts.jsonl", dir / "run");
  options.device = "cuda";
  options.objective = TrainObjective::Grpo;
  options.reward = "regex:[0-9]";
  options.max_completion_tokens = 4;
  return options;
}

TEST(GrpoCuda, RolloutsAndTheLossRunOnTheGpuAndTheRewardRises) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  TrainOptions options = grpo_cuda_options(dir, 16);
  options.num_generations = 8;
  options.batch = 4;
  options.lr = 1e-2;
  options.lr_schedule = LrDecay::Constant;
  options.warmup = 2;
  options.max_steps = 10;
  Trainer trainer(options, {});
  trainer.set_rollouts(batch_engine_rollouts(trainer.tokenizer(), grpo_rollout_settings(options)));
  std::vector<double> rewards;
  Trainer::Progress progress;
  progress.on_step = [&](const StepMetrics& m) {
    ASSERT_TRUE(m.grpo.has_value());
    EXPECT_TRUE(std::isfinite(m.loss)) << "step " << m.step;
    EXPECT_GT(m.grpo->rollout_tokens_per_second, 0);
    rewards.push_back(m.grpo->reward);
  };
  trainer.run(progress);
  ASSERT_EQ(rewards.size(), 10u);
  const double first = (rewards[0] + rewards[1] + rewards[2]) / 3;
  const double last = (rewards[7] + rewards[8] + rewards[9]) / 3;
  std::fprintf(stderr, "[cuda grpo] mean reward of the first 3 steps %.3f, of the last 3 %.3f\n", first, last);
  EXPECT_GT(last, first + 0.3);
}

// LoRA with the KL term on the GPU: the rollouts run the base with the adapters' current values applied at run time,
// the reference is the base's rows, and the KL starts at about 0 (the training forward and the inference model compute
// the same function up to bf16 rounding) and stays finite.
TEST(GrpoCuda, LoraWithAKlTermRunsOnTheGpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  TrainOptions options = grpo_cuda_options(dir, 8);
  options.num_generations = 4;
  options.batch = 2;
  options.lora_rank = 4;
  options.lr = 2e-2;
  options.warmup = 1;
  options.max_steps = 3;
  options.beta = 0.2;
  Trainer trainer(options, {});
  trainer.set_rollouts(batch_engine_rollouts(trainer.tokenizer(), grpo_rollout_settings(options)));
  std::vector<double> kl;
  Trainer::Progress progress;
  progress.on_step = [&](const StepMetrics& m) {
    ASSERT_TRUE(m.grpo.has_value() && m.grpo->kl.has_value() && m.grpo->entropy.has_value());
    EXPECT_TRUE(std::isfinite(m.loss)) << "step " << m.step;
    kl.push_back(*m.grpo->kl);
  };
  trainer.run(progress);
  ASSERT_EQ(kl.size(), 3u);
  EXPECT_LT(std::fabs(kl[0]), 1e-2);
  for (double value : kl) EXPECT_TRUE(std::isfinite(value));
}

}  // namespace
}  // namespace nvfp4lm::test_grpo_cuda
