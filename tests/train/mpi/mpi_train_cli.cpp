// `mpirun -np N nvfp4lm train` (issue 32's acceptance), through the real executable and the real MPI launcher
// (ctest label "mpi"; built when CMake finds an MPI): 2 and 3 oversubscribed ranks write, step for step, the
// checkpoint bytes and the losses of one process; the memory report shows each rank's share of the optimizer state;
// kill -9 of one rank ends every rank within 60 s with a non-zero status, and the run resumes from its last
// checkpoint to the bytes of a run that was never interrupted; a rank that hangs is ended by the watchdog
// (NVFP4LM_RANK_TIMEOUT). One OpenMP thread a process, the reference included: OpenBLAS's GEMM sums depend on its
// thread count.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/test_util.h"
#include "core/device.h"
#include "train/checkpoint.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The launcher and what the ranks need: one OpenMP thread each, root allowed (CI and containers run as root).
std::string mpirun(int ranks) {
  return fmt::format(
      "OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 '{}' {} {} {} -x "
      "OMP_NUM_THREADS -x NVFP4LM_RANK_TIMEOUT '{}'",
      NVFP4LM_MPIEXEC, NVFP4LM_MPIEXEC_FLAGS, NVFP4LM_MPIEXEC_NUMPROC_FLAG, ranks, NVFP4LM_BINARY_PATH);
}

// A shell command line; its exit code (128 + signal when killed), stdout and stderr.
CliResult run_shell(const std::string& command) {
  TempDir dir;
  const std::string line =
      command + " >'" + (dir.path() / "out").string() + "' 2>'" + (dir.path() / "err").string() + "'";
  const int status = std::system(line.c_str());
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(dir.path() / "out");
  result.err = read_file(dir.path() / "err");
  return result;
}

std::vector<double> losses_of(const fs::path& metrics) {
  std::vector<double> losses;
  for (const json& record : read_jsonl(metrics)) losses.push_back(record["loss"].get<double>());
  return losses;
}

// The pid of rank `rank` of the nvfp4lm processes training into `run` (from their environment), or 0.
pid_t rank_pid(const fs::path& run, int rank) {
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline_file(entry.path() / "cmdline"), environ_file(entry.path() / "environ");
    std::stringstream cmdline, environ;
    cmdline << cmdline_file.rdbuf();
    environ << environ_file.rdbuf();
    if (cmdline.str().find(run.string()) == std::string::npos || cmdline.str().find("train") == std::string::npos)
      continue;
    if (environ.str().find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') != std::string::npos)
      return static_cast<pid_t>(std::stoi(name));
  }
  return 0;
}

class MpiTrain : public ::testing::Test {
 protected:
  void SetUp() override { data_ = write_pairs_jsonl(dir_ / "pairs.jsonl", 16); }
  std::string train(const fs::path& run, const std::string& extra = "") const {
    return "train " + tiny_train_flags(data_, {{"--grad-accum", "6"}, {"--max-steps", "6"}}) +
           " --save-every 2 --keep 3 " + "--output " + quoted(run) + " " + extra;
  }
  void expect_same_checkpoint(const fs::path& run, const fs::path& reference, int step) const {
    for (const char* file : {kModelFileName, kOptimizerFileName}) {
      const fs::path a = checkpoint_dir(run, step) / file, b = checkpoint_dir(reference, step) / file;
      ASSERT_TRUE(fs::exists(a)) << a;
      EXPECT_TRUE(read_file(a) == read_file(b)) << a << " differs from " << b;
    }
  }

  TempDir dir_;
  fs::path data_;
};

TEST_F(MpiTrain, TwoAndThreeRanksWriteTheBytesOfOneProcess) {
  const fs::path one = dir_ / "one";
  const CliResult single = run_cli(train(one), "", "OMP_NUM_THREADS=1");
  ASSERT_EQ(single.exit_code, 0) << single.err;
  for (int ranks : {2, 3}) {
    SCOPED_TRACE(testing::Message() << ranks << " ranks");
    const fs::path run = dir_ / ("ranks" + std::to_string(ranks)), memory = dir_ / ("memory" + std::to_string(ranks));
    const CliResult result = run_shell(mpirun(ranks) + " " + train(run, "--memory-report " + quoted(memory)));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.err.find("data parallel: MPI (Open MPI"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(fmt::format("{} ranks", ranks)), std::string::npos) << result.err;
    // Rank 0 speaks for the run: one header, one summary.
    size_t headers = 0;
    for (size_t at = result.err.find("nvfp4lm train: device cpu"); at != std::string::npos;
         at = result.err.find("nvfp4lm train: device cpu", at + 1))
      ++headers;
    EXPECT_EQ(headers, 1u) << result.err;
    for (int step : {2, 4, 6}) expect_same_checkpoint(run, one, step);
    EXPECT_EQ(losses_of(run / "metrics.jsonl"), losses_of(one / "metrics.jsonl"));

    const json report = json::parse(read_file(memory));
    ASSERT_EQ(report["ranks"].size(), static_cast<size_t>(ranks)) << report.dump();
    size_t total = 0, largest = 0;
    for (const json& rank : report["ranks"]) {
      total += rank["optimizer_state_bytes"].get<size_t>();
      largest = std::max(largest, rank["optimizer_state_bytes"].get<size_t>());
    }
    EXPECT_LE(static_cast<double>(largest), static_cast<double>(total) * (1.0 / ranks + 0.05)) << report.dump();
  }
}

TEST_F(MpiTrain, AKilledRankEndsEveryRankAndTheRunResumesBitForBit) {
  // A run long enough to be killed in the middle: 400 steps of one micro-batch a rank, a checkpoint every 50.
  auto long_run = [&](const fs::path& run, const std::string& extra) {
    return "train " + tiny_train_flags(data_, {{"--grad-accum", "2"}, {"--max-steps", "400"}}) +
           " --save-every 50 --output " + quoted(run) + " " + extra;
  };
  const fs::path reference = dir_ / "reference", run = dir_ / "killed";
  ASSERT_EQ(run_cli(long_run(reference, ""), "", "OMP_NUM_THREADS=1").exit_code, 0);

  CliResult killed;
  std::thread launcher([&] { killed = run_shell(mpirun(2) + " " + long_run(run, "")); });
  const Clock::time_point start = Clock::now();
  while (!fs::exists(checkpoint_dir(run, 100)) && Clock::now() - start < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const pid_t victim = rank_pid(run, 1);
  ASSERT_GT(victim, 0) << "rank 1 not found";
  const Clock::time_point kill_time = Clock::now();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  launcher.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - kill_time).count();
  EXPECT_NE(killed.exit_code, 0) << killed.err;
  EXPECT_LT(seconds, 60) << "the other rank must end within 60 s";
  EXPECT_FALSE(fs::exists(checkpoint_dir(run, 400))) << "the run ended before the kill: nothing was tested";
  EXPECT_EQ(rank_pid(run, 0), 0) << "rank 0 is still running";

  const CliResult resumed = run_shell(mpirun(2) + " " + long_run(run, "--resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming"), std::string::npos) << resumed.err;
  expect_same_checkpoint(run, reference, 400);
}

TEST_F(MpiTrain, AHangingRankIsEndedByTheWatchdog) {
  const fs::path run = dir_ / "hung";
  CliResult result;
  std::thread launcher([&] {
    result = run_shell("NVFP4LM_RANK_TIMEOUT=2 " + mpirun(2) + " train " +
                       tiny_train_flags(data_, {{"--grad-accum", "2"}, {"--max-steps", "100000"}}) + " --output " +
                       quoted(run));
  });
  const Clock::time_point start = Clock::now();
  while (!fs::exists(run / "metrics.jsonl") && Clock::now() - start < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const pid_t victim = rank_pid(run, 1);
  ASSERT_GT(victim, 0) << "rank 1 not found";
  const Clock::time_point stop_time = Clock::now();
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);  // alive, but never again in a collective: the launcher sees nothing
  launcher.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - stop_time).count();
  EXPECT_NE(result.exit_code, 0);
  EXPECT_LT(seconds, 30);
  EXPECT_NE(result.err.find("rank 0 of 2 waited"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("NVFP4LM_RANK_TIMEOUT 2 s"), std::string::npos) << result.err;
}

// The GPU path under the real launcher, on the device this build has (in CI the emulated one, a device per process,
// with the host-staged transport standing in for NCCL): two GPU ranks follow one GPU's losses to fp32 rounding, the
// set-up line names the transport, and one GPU resumes their checkpoint.
TEST_F(MpiTrain, TwoGpuRanksFollowOneGpu) {
  if (!NVFP4LM_HAS_CUDA) GTEST_SKIP() << "built without CUDA";
  if (!cuda_is_emulated()) GTEST_SKIP() << "needs a GPU a rank (NCCL); the emulated build runs this";
  auto gpu_run = [&](const fs::path& run, const std::string& extra) {
    return "train " + tiny_train_flags(data_, {{"--grad-accum", "2"}, {"--max-steps", "4"}}) +
           " --device cuda --save-every 2 --output " + quoted(run) + " " + extra;
  };
  const fs::path one = dir_ / "gpu-one", two = dir_ / "gpu-two";
  const CliResult single = run_cli(gpu_run(one, ""), "", "OMP_NUM_THREADS=1");
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const CliResult ranks = run_shell(mpirun(2) + " " + gpu_run(two, ""));
  ASSERT_EQ(ranks.exit_code, 0) << ranks.err;
  EXPECT_NE(
      ranks.err.find(
          "gradients reduced onto their owners through host memory, in rank order (the host-staged transport: no NCCL: "
          "the emulated CUDA device runs on the CPU (NCCL needs GPUs))"),
      std::string::npos)
      << ranks.err;
  const std::vector<double> a = losses_of(two / "metrics.jsonl"), b = losses_of(one / "metrics.jsonl");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * b[i]) << "step " << i + 1;

  fs::remove_all(checkpoint_dir(two, 4));
  const CliResult resumed = run_cli(gpu_run(two, "--resume"), "", "OMP_NUM_THREADS=1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const std::vector<double> after = losses_of(two / "metrics.jsonl");
  ASSERT_EQ(after.size(), 4u);  // the records of steps 3 and 4 rewritten by the resumed run
  for (size_t i = 2; i < 4; ++i) EXPECT_NEAR(after[i], a[i], 1e-4 * a[i]) << "step " << i + 1;
}

}  // namespace
}  // namespace nvfp4lm::test
