// The predecessor's guard (core/memory_guard.h, train --gpu-limit-gb) on the GPU (the emulated device in CI, whose
// memory the guard reads as it reads a real one's: total - free). A run whose device memory grows past the limit
// after step 2 (a block taken on the device, as another process or a workspace would) is stopped with one
// error naming what was over and the checkpoint that is kept; that checkpoint is the straight run's, byte for byte,
// and --resume from it ends where the straight run ends (byte for byte on the emulated device, whose atomics run in
// a fixed order; within bf16 noise on a real GPU, whose attention backward adds with atomics: test_trainer_cuda.cpp).
// A limit below what the run needs stops it while loading, before anything is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/test_util.h"
#include "core/cuda/runtime.h"
#include "core/memory.h"
#include "core/memory_guard.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_memory_guard_cuda {
namespace {

using test::TempDir;

std::vector<double> losses_of(const test::RecordedRun& run) {
  std::vector<double> losses;
  for (const StepMetrics& step : run.steps) losses.push_back(step.loss);
  return losses;
}

TEST(MemoryGuardCuda, StopsTheRunKeepsItsLastCheckpointAndResumeContinuesIt) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 24);
  TrainOptions options = test::tiny_train_options(data, dir / "straight");
  options.device = "cuda";
  options.max_steps = 5;
  options.save_every = 1;
  options.keep = 10;
  // The highest reading the guard would take of the straight run at the end of a step (the device's memory in use;
  // on a GPU whose memory is the host's, the process's resident memory too): the guarded run takes the same, plus
  // noise in the resident memory, which the margin covers.
  const bool host_memory = device_memory_is_host_memory(Device::cuda(0));
  auto reading = [&] { return std::max(cuda::device_memory_in_use(0), host_memory ? current_rss_bytes() : 0); };
  size_t highest = 0;
  std::vector<double> straight;
  {
    Trainer trainer(options, {});
    Trainer::Progress progress;
    progress.on_step = [&](const StepMetrics& metrics) {
      straight.push_back(metrics.loss);
      highest = std::max(highest, reading());
    };
    trainer.run(progress);
  }
  const size_t limit = highest + (host_memory ? size_t{256} << 20 : size_t{64} << 20);

  options.output = (dir / "guarded").string();
  options.gpu_limit_gb = to_gib(limit);
  options.gpu_poll_secs = 3600;  // only the check after each new device allocation: the trip point is deterministic
  Tensor taken;
  const std::string message = test::error_message([&] {
    Trainer trainer(options, {});
    Trainer::Progress progress;
    progress.on_step = [&](const StepMetrics& metrics) {
      if (metrics.step != 2) return;
      // A block that takes the device past the limit (as another process or a workspace would).
      const size_t extra = limit + (size_t{64} << 20) - cuda::device_memory_in_use(0);
      taken = Tensor::empty(Shape{static_cast<int64_t>(extra)}, DType::U8, Device::cuda(0));
    };
    trainer.run(progress);
  });
  EXPECT_FALSE(memory_guard_tripped());  // the guard went with its trainer
  taken = Tensor();
  for (const std::string part : {"memory guard", "cuda:0", "in use (driver)", "over --gpu-limit-gb",
                                 "--gpu-over-secs 0", "the last checkpoint, step ", "is kept: add --resume"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  // Tripped after step 2, the run stops at its next device allocation or step, whichever comes first: the step-2
  // checkpoint (host allocations only) is written whole before that, and kept.
  const std::optional<CheckpointInfo> kept = latest_checkpoint(options.output);
  ASSERT_TRUE(kept.has_value());
  ASSERT_EQ(kept->step, 2);
  EXPECT_NE(message.find(fmt::format("step {}, is kept", kept->step)), std::string::npos) << message;
  EXPECT_EQ(test::read_file(kept->dir / kModelFileName),
            test::read_file(checkpoint_dir(dir / "straight", kept->step) / kModelFileName));

  // A resumed run keeps the guard it was started with unless the flag is given again: here without one (the extra
  // block stays in this process's allocator cache, over the limit still).
  options.gpu_limit_gb = 0;
  options.resume = true;
  Trainer resumed(options, {"gpu_limit_gb"});
  EXPECT_EQ(resumed.resumed_from(), kept->step);
  const std::vector<double> rest = losses_of(test::run_recording_steps(resumed));
  ASSERT_EQ(rest.size(), straight.size() - static_cast<size_t>(kept->step));
#if NVFP4LM_CUDA_EMULATION
  for (size_t i = 0; i < rest.size(); ++i)
    EXPECT_EQ(rest[i], straight[kept->step + i]) << "step " << kept->step + i + 1;
  EXPECT_EQ(test::read_file(checkpoint_dir(options.output, 5) / kModelFileName),
            test::read_file(checkpoint_dir(dir / "straight", 5) / kModelFileName));
#else
  for (size_t i = 0; i < rest.size(); ++i)
    EXPECT_LT(std::fabs(rest[i] - straight[kept->step + i]) / straight[kept->step + i], 1e-2);
#endif
}

TEST(MemoryGuardCuda, ALimitBelowTheRunStopsItWhileLoading) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  TempDir dir;
  TrainOptions options = test::tiny_train_options(test::write_pairs_jsonl(dir / "pairs.jsonl", 8), dir / "run");
  options.device = "cuda";
  options.gpu_limit_gb = 1.0 / 1024;  // 1 MiB
  test::expect_error([&] { Trainer trainer(options, {}); }, {"memory guard", "over --gpu-limit-gb 0.000976562"});
  EXPECT_FALSE(fs::exists(dir / "run"));  // a new run's directory goes with the failure
  EXPECT_FALSE(memory_guard_tripped());
}

TEST(MemoryGuardCuda, FlagsAreChecked) {
  test::expect_error([] { check_memory_guard_options({.limit_gib = -1}); }, {"--gpu-limit-gb", ">= 0"});
  test::expect_error([] { check_memory_guard_options({.limit_gib = 1, .over_seconds = NAN}); }, {"--gpu-over-secs"});
  test::expect_error([] { check_memory_guard_options({.limit_gib = 1, .poll_seconds = 0.01}); },
                     {"--gpu-poll-secs", "0.05"});
  test::expect_error([] { MemoryGuard guard(Device::cpu(), {.limit_gib = 1}); }, {"--device cpu", "--max-memory"});
}

}  // namespace
}  // namespace nvfp4lm::test_memory_guard_cuda
