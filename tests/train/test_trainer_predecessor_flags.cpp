// The training settings that came with the F# predecessor's workflow (README "Coming from the F# trainer"):
// --steps-per-epoch caps each epoch and moves on to the next one; --max-layers trains a model of the first blocks;
// --synthetic trains a random in-memory model (default data: the whoami set); --train-last-layers 0 trains every
// parameter; --output-dat writes one .dat file with config.json and the tokenizer beside it, which loads back, and
// never replaces another model's files there without --overwrite.
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "io/model_files.h"
#include "model/qwen3_model.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_trainer_predecessor_flags {
namespace {

using test::TempDir;

std::vector<StepMetrics> run_all(Trainer& trainer) { return test::run_recording_steps(trainer).steps; }

TEST(TrainerPredecessorFlags, StepsPerEpochCapsEachEpochThenMovesOn) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 16);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.max_steps = 0;
  options.epochs = 3;
  options.batch = 3;  // one sample a row: 6 batches an epoch
  options.steps_per_epoch = 2;
  Trainer trainer(options, {});
  EXPECT_EQ(trainer.total_steps(), 6);
  const std::vector<StepMetrics> steps = run_all(trainer);
  ASSERT_EQ(steps.size(), 6u);
  // After the 2nd step of an epoch the next one starts: each step's position lies in its own epoch.
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(static_cast<int64_t>(std::floor(steps[i].epoch)), static_cast<int64_t>(i / 2)) << "step " << i + 1;
    EXPECT_EQ(steps[i].micro_batches, 1);
  }
  // An epoch shorter than the cap is not padded: 6 batches in steps of 4 make 2 steps (4 + 2 micro-batches).
  options.output = (dir / "short").string();
  options.grad_accum = 4;
  options.steps_per_epoch = 5;
  Trainer uncapped(options, {});
  EXPECT_EQ(uncapped.total_steps(), 6);
  const std::vector<StepMetrics> grouped = run_all(uncapped);
  ASSERT_EQ(grouped.size(), 6u);
  EXPECT_EQ(grouped[0].micro_batches, 4);
  EXPECT_EQ(grouped[1].micro_batches, 2);
}

TEST(TrainerPredecessorFlags, MaxLayersTrainsAModelOfTheFirstBlocks) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 8);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.max_steps = 2;
  options.max_layers = 1;
  options.export_path = (dir / "export").string();
  Trainer trainer(options, {});
  EXPECT_EQ(trainer.model().config().num_hidden_layers, 1);
  for (const NamedTensor& master : trainer.model().master_weights())
    EXPECT_EQ(master.name.find("layers.1."), std::string::npos) << master.name;
  trainer.run();
  const Qwen3Model exported = Qwen3Model::load(dir / "export");
  EXPECT_EQ(exported.config().num_hidden_layers, 1);

  options.output = (dir / "too-many").string();
  options.export_path.clear();
  options.max_layers = 3;
  try {
    Trainer refused(options, {});
    ADD_FAILURE() << "--max-layers 3 of 2 layers was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-layers 3"), std::string::npos) << e.what();
  }
}

TEST(TrainerPredecessorFlags, SyntheticTrainsARandomModelOnTheWhoamiData) {
  TempDir dir;
  TrainOptions options;
  options.synthetic = true;
  options.in_features = 32;
  options.out_features = 48;
  options.output = (dir / "run").string();
  options.seq_len = 64;
  options.batch = 2;
  options.max_steps = 2;
  options.lr = 1e-3;
  {
    Trainer trainer(options, {});
    EXPECT_EQ(trainer.model().config().hidden_size, 32);
    EXPECT_EQ(trainer.model().config().intermediate_size, 48);
    EXPECT_EQ(trainer.dataset_summary().records, 400);  // `nvfp4lm data whoami`'s default set
    EXPECT_GE(trainer.dataset_summary().samples, 400);  // multi-turn ones split (tokenizer/chat.h)
    const std::vector<std::string> lines = trainer.setup_lines();
    EXPECT_NE(lines.front().find("--synthetic"), std::string::npos) << lines.front();
    const std::vector<StepMetrics> steps = run_all(trainer);
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_TRUE(std::isfinite(steps.back().loss));
  }

  // A resumed synthetic run makes the same model and data again.
  options.max_steps = 3;
  options.resume = true;
  Trainer resumed(options, {"max_steps"});
  EXPECT_EQ(resumed.step(), 2);
  EXPECT_EQ(run_all(resumed).size(), 1u);
}

TEST(TrainerPredecessorFlags, TrainLastLayersZeroTrainsEveryParameter) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 8);
  TrainOptions options = test::tiny_train_options(data, dir / "all");
  Trainer all(options, {});
  options.output = (dir / "zero").string();
  options.train_last_layers = 0;
  Trainer zero(options, {});
  EXPECT_EQ(zero.model().parameters().size(), all.model().parameters().size());
  options.output = (dir / "one").string();
  options.train_last_layers = 1;
  Trainer one(options, {});
  EXPECT_LT(one.model().parameters().size(), all.model().parameters().size());
}

TEST(TrainerPredecessorFlags, OutputDatWritesOneFileWithConfigBesideIt) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 8);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.max_steps = 2;
  const fs::path artifacts = dir / "artifacts";
  options.output_dat = (artifacts / "whoami-trained.dat").string();
  {
    Trainer trainer(options, {});
    trainer.run();
  }
  EXPECT_TRUE(fs::is_regular_file(artifacts / "whoami-trained.dat"));
  EXPECT_TRUE(fs::is_regular_file(artifacts / "config.json"));
  EXPECT_TRUE(fs::is_regular_file(artifacts / "tokenizer.json"));
  const Qwen3Model model = Qwen3Model::load(artifacts / "whoami-trained.dat");
  EXPECT_EQ(model.config().num_hidden_layers, 2);
  EXPECT_EQ(open_model(artifacts / "whoami-trained.dat")->format(), ModelFormat::Dat);

  // A second export beside it with the same config keeps config.json; one with another config is refused when it
  // comes to replace config.json (the run's checkpoint stays), unless --overwrite; an existing .dat before training.
  options.output = (dir / "run2").string();
  options.output_dat = (artifacts / "second.dat").string();
  {
    Trainer trainer(options, {});
    trainer.run();
  }
  EXPECT_TRUE(fs::is_regular_file(artifacts / "second.dat"));
  const std::string config = test::read_file(artifacts / "config.json");
  options.output = (dir / "run3").string();
  options.output_dat = (artifacts / "third.dat").string();
  options.max_layers = 1;  // another config
  test::expect_error(
      [&] {
        Trainer trainer(options, {});
        trainer.run();
      },
      {"config.json", "--overwrite"});
  EXPECT_EQ(test::read_file(artifacts / "config.json"), config);
  EXPECT_FALSE(fs::exists(artifacts / "third.dat"));
  options.output = (dir / "run4").string();
  options.output_dat = (artifacts / "whoami-trained.dat").string();
  options.max_layers = 0;
  test::expect_error([&] { Trainer trainer(options, {}); }, {"whoami-trained.dat", "--overwrite"});
}

}  // namespace
}  // namespace nvfp4lm::test_trainer_predecessor_flags
