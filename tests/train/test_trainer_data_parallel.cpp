// Data-parallel training (train/dist/data_parallel.h) through the Trainer, with N ranks as threads of this process
// (LocalGroup: the code every rank runs under mpirun; tests/train/mpi/ runs it under mpirun): 2 and 3 ranks end
// with the checkpoints one process writes, byte for byte (masters and optimizer state at every save), and the same
// losses; a run resumes on another number of ranks and still matches; each rank holds about 1/N of the optimizer
// state; the settings data parallelism cannot take are one-line errors on every rank. One OpenMP thread a rank, and
// one for the reference: OpenBLAS's GEMM sums depend on its thread count.
#include <gtest/gtest.h>

#include <mutex>

#include "common/test_util.h"
#include "core/logging.h"
#include "train/checkpoint.h"
#include "train/data_parallel_test_support.h"
#include "train/dist/local_group.h"

namespace nvfp4lm::test::test_trainer_data_parallel {
namespace {

using json = nlohmann::json;

std::string file_bytes(const fs::path& path) { return read_file(path); }

class DataParallelTrainer : public ::testing::Test {
 protected:
  void SetUp() override { data_ = write_pairs_jsonl(dir_ / "pairs.jsonl", 16); }
  // 6 micro-batches a step (2 or 3 a rank), checkpoints at steps 2, 4 and 6.
  TrainOptions options(const std::string& run) const {
    TrainOptions o = tiny_train_options(data_, dir_ / run);
    o.grad_accum = 6;
    o.max_steps = 6;
    o.save_every = 2;
    o.keep = 3;
    return o;
  }
  void expect_same_checkpoints(const std::string& run, const std::string& reference,
                               std::initializer_list<int> steps) const {
    for (int step : steps)
      for (const char* file : {kModelFileName, kOptimizerFileName}) {
        const fs::path a = checkpoint_dir(dir_ / run, step) / file, b = checkpoint_dir(dir_ / reference, step) / file;
        ASSERT_TRUE(fs::exists(a)) << a;
        EXPECT_TRUE(file_bytes(a) == file_bytes(b))
            << run << " step " << step << " " << file << " differs from " << reference;
      }
  }

  TempDir dir_;
  fs::path data_;
};

TEST_F(DataParallelTrainer, TwoAndThreeRanksWriteTheCheckpointsOfOneProcess) {
  const std::vector<RankResult> one = train_on_ranks(options("one"), 1);
  ASSERT_EQ(one[0].losses.size(), 6u);
  for (int ranks : {2, 3}) {
    SCOPED_TRACE(testing::Message() << ranks << " ranks");
    const std::string run = "ranks" + std::to_string(ranks);
    const std::vector<RankResult> many = train_on_ranks(options(run), ranks);
    size_t state_bytes = 0, largest = 0;
    for (const RankResult& rank : many) {
      EXPECT_EQ(rank.losses, one[0].losses);  // every rank logs the whole step's loss
      state_bytes += rank.optimizer_state_bytes;
      largest = std::max(largest, rank.optimizer_state_bytes);
    }
    expect_same_checkpoints(run, "one", {2, 4, 6});
    // ZeRO-1: the shards add up to one process's state, and none holds much more than 1/N of it (shards end at
    // parameter boundaries: the tiny model's 25 tensors split 50/50 and 32/34/34 %).
    EXPECT_EQ(state_bytes, one[0].optimizer_state_bytes);
    EXPECT_LE(static_cast<double>(largest), static_cast<double>(one[0].optimizer_state_bytes) * (1.0 / ranks + 0.05));
    // Only rank 0 wrote: one metrics file with one record a step.
    EXPECT_EQ(read_jsonl(dir_ / run / "metrics.jsonl").size(), 6u);
  }
  // The order-fixed sum is what makes this work: the reverse order (a rank's contribution added last first) would
  // give other bits, which DistReduce.RanksSumInTheOrderOfOneProcessBitForBit shows on the sums themselves.
}

TEST_F(DataParallelTrainer, AnUnevenLastStepAndBf16MastersWithAdamW8bit) {
  // --epochs 1 over 8 micro-batches, 6 a step: the last step has 2, fewer than 3 ranks.
  TrainOptions o = options("one");
  o.max_steps = 0;
  o.epochs = 1;
  o.save_every = 0;
  o.bf16_master = true;
  o.optimizer = "adamw8bit";
  const std::vector<RankResult> one = train_on_ranks(o, 1);
  ASSERT_EQ(one[0].losses.size(), 2u);
  o.output = (dir_ / "ranks3").string();
  const std::vector<RankResult> three = train_on_ranks(o, 3);
  EXPECT_EQ(three[0].losses, one[0].losses);
  expect_same_checkpoints("ranks3", "one", {2});
}

TEST_F(DataParallelTrainer, ResumesOnAnotherNumberOfRanks) {
  train_on_ranks(options("one"), 1);
  // Two ranks to the end, then back to step 2 (its newer checkpoints gone, as after a crash), three ranks on.
  train_on_ranks(options("moved"), 2);
  for (int step : {4, 6}) fs::remove_all(checkpoint_dir(dir_ / "moved", step));
  TrainOptions resume = options("moved");
  resume.resume = true;
  const std::vector<RankResult> three = train_on_ranks(resume, 3, {"output", "resume"});
  EXPECT_EQ(three[0].losses.size(), 4u);
  expect_same_checkpoints("moved", "one", {6});
  // And from one process's checkpoint to two ranks.
  fs::remove_all(checkpoint_dir(dir_ / "one", 6));
  TrainOptions from_one = options("one");
  from_one.resume = true;
  train_on_ranks(from_one, 2, {"output", "resume"});
  expect_same_checkpoints("one", "moved", {6});
}

TEST_F(DataParallelTrainer, EvaluationAndCalibrationAreOneProcesssOnRanks) {
  // Evaluation batch i on rank i mod N, its statistics added in batch order; --calibrate-steps' activation ranges
  // the max over the ranks' micro-batches. 3 ranks and 2 evaluation batches: one rank evaluates nothing.
  auto configure = [&](const std::string& run) {
    TrainOptions o = options(run);
    o.grad_accum = 3;
    o.max_steps = 4;
    o.save_every = 0;
    o.eval_split = 0.25;
    o.eval_every = 2;
    o.calibrate_steps = 2;
    return o;
  };
  train_on_ranks(configure("one"), 1);
  train_on_ranks(configure("ranks3"), 3);
  const std::vector<json> one = read_jsonl(dir_ / "one" / "metrics.jsonl"),
                          three = read_jsonl(dir_ / "ranks3" / "metrics.jsonl");
  ASSERT_EQ(one.size(), 4u);
  ASSERT_EQ(three.size(), 4u);
  int evaluations = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].contains("eval_loss"), three[i].contains("eval_loss")) << "step " << i + 1;
    if (!one[i].contains("eval_loss")) continue;
    ++evaluations;
    for (const char* key : {"eval_loss", "eval_token_accuracy", "eval_tokens"})
      EXPECT_EQ(three[i][key], one[i][key]) << key << " at step " << i + 1;
  }
  EXPECT_EQ(evaluations, 2);
  const json a = json::parse(read_file(checkpoint_dir(dir_ / "ranks3", 4) / kTrainerStateFileName)),
             b = json::parse(read_file(checkpoint_dir(dir_ / "one", 4) / kTrainerStateFileName));
  ASSERT_TRUE(b.contains("calibration")) << b.dump();
  EXPECT_FALSE(b["calibration"]["input_amax"].empty());
  EXPECT_EQ(a["calibration"], b["calibration"]);
  expect_same_checkpoints("ranks3", "one", {4});
}

TEST_F(DataParallelTrainer, SettingsItCannotTakeAreErrorsOnEveryRank) {
  auto failure = [&](TrainOptions o) {
    std::mutex mutex;
    std::vector<std::string> messages;
    const QuietInfoLogs quiet;
    const std::string caught = error_message([&] {
      run_local_group(2, [&](Communicator& comm) {
        try {
          Trainer trainer(o, {}, &comm);
        } catch (const Error& e) {
          const std::lock_guard lock(mutex);
          messages.emplace_back(e.what());
          throw;
        }
      });
    });
    EXPECT_EQ(messages.size(), 2u) << "both ranks refuse on their own: " << caught;
    return caught;
  };
  TrainOptions o = options("bad");
  o.grad_accum = 3;
  EXPECT_NE(failure(o).find("--grad-accum 3 over 2 ranks"), std::string::npos);
  EXPECT_NE(failure(o).find("--grad-accum 4 keeps the global batch 8 rows"), std::string::npos);
  o = options("bad");
  o.fused_update = true;  // which takes one micro-batch a step and no clipping
  o.grad_accum = 1;
  o.max_grad_norm = 0;
  EXPECT_NE(failure(o).find("--fused-update"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "bad" / "step-2"));
}

}  // namespace
}  // namespace nvfp4lm::test::test_trainer_data_parallel
