// The training loop on the GPU: 20 QAT steps on the tiny fixture model follow the CPU's losses within bf16
// tolerance (plain fp32 masters and the low-memory recipe: bf16 masters, 8-bit moments, recompute, packed weights,
// fused update); a GPU run stopped and resumed reproduces the straight run's losses within bf16 noise (the
// attention backward accumulates dq with fp32 atomics, so GPU runs are not bit-reproducible); a checkpoint written
// on the GPU resumes on the CPU and one written on the CPU resumes on the GPU. Every comparison prints its measured
// difference so a GPU run shows how much room each bound leaves.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>

#include "common/emulated_arch.h"
#include "common/test_util.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_trainer_cuda {
namespace {

using test::TempDir;

// Per-step loss: |gpu - cpu| / cpu. bf16 activations move a 2-layer model's loss by well under 1 %; the runs then
// diverge slowly as the updates differ.
constexpr double kLossBound = 3e-2;
// Resume on the GPU: the same arithmetic but atomics in a different order (fp32 rounding only).
constexpr double kResumeBound = 1e-2;

std::vector<double> losses_of(Trainer& trainer, int64_t steps) {
  std::vector<double> losses;
  for (int64_t i = 0; i < steps && !trainer.done(); ++i) losses.push_back(trainer.train_step().loss);
  return losses;
}

std::vector<double> run(const TrainOptions& options) {
  Trainer trainer(options, {});
  return losses_of(trainer, options.max_steps);
}

// Worst relative difference per step; prints both curves' ends.
double worst_difference(const std::vector<double>& actual, const std::vector<double>& expected,
                        const std::string& what) {
  EXPECT_EQ(actual.size(), expected.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i) {
    const double rel = std::fabs(actual[i] - expected[i]) / std::fabs(expected[i]);
    EXPECT_TRUE(std::isfinite(actual[i])) << what << " step " << i + 1;
    worst = std::max(worst, rel);
  }
  if (!actual.empty() && !expected.empty()) {
    std::fprintf(stderr, "[bf16] %-34s first %.5f vs %.5f, last %.5f vs %.5f, worst step rel %.3g\n", what.c_str(),
                 actual.front(), expected.front(), actual.back(), expected.back(), worst);
  }
  return worst;
}

struct Recipe {
  const char* name;
  std::function<void(TrainOptions&)> configure;
};

const Recipe kRecipes[] = {
    {"fp32 masters, adamw", [](TrainOptions&) {}},
    {"low-memory recipe",
     [](TrainOptions& o) {
       o.bf16_master = true;
       o.optimizer = "adamw8bit";
       o.recompute = Recompute::Block;
       o.packed_weights = true;
       o.fused_update = true;
       o.max_grad_norm = 0;
     }},
};

TEST(TrainerCuda, LossesFollowTheCpuFor20Steps) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  for (const Recipe& recipe : kRecipes) {
    SCOPED_TRACE(recipe.name);
    TempDir dir;
    const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 24);
    TrainOptions options = test::tiny_train_options(data, dir / "cpu");
    options.max_steps = 20;
    recipe.configure(options);
    const std::vector<double> cpu = run(options);
    options.output = (dir / "gpu").string();
    options.device = "cuda";
    const std::vector<double> gpu = run(options);
    EXPECT_LT(worst_difference(gpu, cpu, recipe.name), kLossBound);
    // And it learns: the loss falls by a good part over the 20 steps.
    ASSERT_EQ(gpu.size(), 20u);
    EXPECT_LT(gpu.back(), 0.8 * gpu.front());
  }
}

// `--objective dpo` (issue 50) on the GPU: the reference log-probabilities and the preference loss head (the fused
// lm_head cross-entropy run row by row, twice) follow the CPU's losses, and the run learns the preference.
TEST(TrainerCuda, DpoLossesFollowTheCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  TempDir dir;
  const fs::path data = test::write_preference_jsonl(dir / "prefs.jsonl", 12);
  TrainOptions options = test::tiny_train_options(data, dir / "cpu");
  options.objective = TrainObjective::Dpo;
  options.beta = 0.5;
  options.lr = 1e-3;
  const std::vector<double> cpu = run(options);
  options.output = (dir / "gpu").string();
  options.device = "cuda";
  const std::vector<double> gpu = run(options);
  EXPECT_LT(worst_difference(gpu, cpu, "dpo"), kLossBound);
  ASSERT_EQ(gpu.size(), 6u);
  EXPECT_NEAR(gpu.front(), std::log(2.0), 1e-2);  // the policy starts as its own reference
  EXPECT_LT(gpu.back(), 0.8 * gpu.front());
}

// `--qat w4a4` on a GPU with FP4 tensor cores (the emulated device presenting a GB10, sm_121, then a B200, sm_100):
// the layers' linears multiply NVFP4 activations by NVFP4 weights on the block-scaled FP4 mma ("cuda/nvfp4-mma-fp4")
// or cuBLASLt's block-scaled FP4 matmul ("cuda/nvfp4-cublaslt-fp4"), exact products where the CPU multiplies their
// BF16-free fp32 values: the losses follow the CPU's within the same bound.
TEST(TrainerCuda, W4a4OnTheFp4TensorCoresFollowsTheCpuFor20Steps) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 24);
  TrainOptions options = test::tiny_train_options(data, dir / "cpu");
  options.max_steps = 20;
  options.qat = QatMode::W4A4;
  const std::vector<double> cpu = run(options);
  int ran = 0;
  for (const auto& [arch, path] : {std::pair{121, "cuda/nvfp4-mma-fp4"}, std::pair{100, "cuda/nvfp4-cublaslt-fp4"}}) {
    const test::EmulatedArch blackwell(arch);
    options.output = (dir / ("gpu-" + std::to_string(arch))).string();
    options.device = "cuda";
    Trainer trainer(options, {});
    if (trainer.compute_path().find(path) == std::string::npos) continue;  // a real GPU is one of them at most
    EXPECT_EQ(trainer.compute_path(), std::string(path) + " + cuda/dequant-gemm");
    const std::vector<double> gpu = losses_of(trainer, options.max_steps);
    EXPECT_LT(worst_difference(gpu, cpu, std::string("w4a4 on ") + path), kLossBound);
    ASSERT_EQ(gpu.size(), 20u);
    EXPECT_LT(gpu.back(), 0.8 * gpu.front());
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "this GPU has no native W4A4";
}

TEST(TrainerCuda, ResumeReproducesTheLossCurve) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 24);
  TrainOptions options = test::tiny_train_options(data, dir / "straight");
  options.max_steps = 12;
  options.device = "cuda";
  const std::vector<double> straight = run(options);

  options.output = (dir / "stopped").string();
  std::vector<double> stopped;
  {
    Trainer trainer(options, {});
    stopped = losses_of(trainer, 5);
    trainer.save_checkpoint();
  }
  options.resume = true;
  Trainer resumed(options, {});
  EXPECT_EQ(resumed.resumed_from(), 5);
  for (double loss : losses_of(resumed, 12)) stopped.push_back(loss);
  EXPECT_LT(worst_difference(stopped, straight, "gpu resume"), kResumeBound);
}

// A checkpoint written on one device continues on the other: the resumed losses follow a straight run on the
// device that resumes, within bf16 tolerance.
TEST(TrainerCuda, CheckpointsMoveBetweenCpuAndGpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"cuda", "cpu"}, {"cpu", "cuda"}}) {
    SCOPED_TRACE(from + " -> " + to);
    TempDir dir;
    const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 24);
    TrainOptions options = test::tiny_train_options(data, dir / "straight");
    options.max_steps = 10;
    options.device = to;
    const std::vector<double> straight = run(options);

    options.output = (dir / "moved").string();
    options.device = from;
    std::vector<double> moved;
    {
      Trainer trainer(options, {});
      moved = losses_of(trainer, 4);
      trainer.save_checkpoint();
    }
    options.device = to;
    options.resume = true;
    Trainer resumed(options, {});
    EXPECT_EQ(resumed.resumed_from(), 4);
    for (double loss : losses_of(resumed, 10)) moved.push_back(loss);
    EXPECT_LT(worst_difference(moved, straight, from + " checkpoint resumed on " + to), kLossBound);
  }
}

}  // namespace
}  // namespace nvfp4lm::test_trainer_cuda
