// Resume is bit-identical (trainer.h): a run stopped after k of N steps (checkpoint at k, process gone, a new Trainer
// with --resume) gives exactly the per-step losses, learning rates and gradient norms of the run that never stopped,
// and its final master weights and optimizer state are the same bytes. Cases: plain AdamW, gradient accumulation,
// --epochs runs crossing an epoch boundary (one with a short last step), 8-bit AdamW, BF16 masters (stochastic
// rounding under QAT w4a16), W4A4 with 16x16 blocks, LoRA adapters. Also: a resume skips a damaged newest checkpoint
// (what a kill during a checkpoint write can leave) and an unfinished step-N.tmp, and continues from the previous one.
#include <gtest/gtest.h>

#include <functional>

#include "common/test_util.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_trainer_resume {
namespace {

using test::TempDir;

struct StepRecord {
  double loss = 0, lr = 0, grad_norm = 0;
  int micro_batches = 0;
  bool operator==(const StepRecord&) const = default;
};

std::ostream& operator<<(std::ostream& out, const StepRecord& r) {
  return out << fmt::format("{{loss {:.17g}, lr {:.17g}, gnorm {:.17g}, micro-batches {}}}", r.loss, r.lr, r.grad_norm,
                            r.micro_batches);
}

StepRecord record_of(const StepMetrics& m) { return {m.loss, m.lr, m.grad_norm, m.micro_batches}; }

struct RunResult {
  std::vector<StepRecord> steps;
  std::map<std::string, std::string> masters;
  std::map<std::string, std::string> optimizer_state;
};

void finish(Trainer& trainer, RunResult& result) {
  Trainer::Progress progress;
  progress.on_step = [&](const StepMetrics& m) { result.steps.push_back(record_of(m)); };
  trainer.run(progress);
  result.masters = test::tensor_bytes(trainer.model().master_weights());
  result.optimizer_state = test::tensor_bytes(trainer.optimizer().state_tensors());
}

RunResult run_uninterrupted(const TrainOptions& options) {
  Trainer trainer(options, {});
  RunResult result;
  finish(trainer, result);
  return result;
}

// k steps, a checkpoint, the Trainer destroyed (the process "stops"); then a new Trainer resumes and finishes.
// The flags are given again on resume (as a user would retype them): equal values must be accepted.
RunResult run_interrupted(TrainOptions options, int64_t stop_after) {
  RunResult result;
  {
    Trainer trainer(options, {});
    for (int64_t i = 0; i < stop_after; ++i) result.steps.push_back(record_of(trainer.train_step()));
    trainer.save_checkpoint();
  }
  std::set<std::string> given;
  const nlohmann::json flags = train_options_to_json(options);
  for (const auto& [key, value] : flags.items()) given.insert(key);
  options.resume = true;
  Trainer resumed(options, given);
  EXPECT_EQ(resumed.resumed_from(), stop_after);
  EXPECT_EQ(resumed.step(), stop_after);
  finish(resumed, result);
  return result;
}

struct ResumeCase {
  std::string name;
  std::function<void(TrainOptions&)> configure;
  int64_t stop_after;
  int64_t expected_steps;
};

class TrainerResume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(TrainerResume, IsBitIdenticalToARunThatNeverStopped) {
  const ResumeCase& c = GetParam();
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 16);
  TrainOptions options = test::tiny_train_options(data, dir / "unused");
  c.configure(options);

  options.output = (dir / "straight").string();
  const RunResult straight = run_uninterrupted(options);
  options.output = (dir / "stopped").string();
  const RunResult stopped = run_interrupted(options, c.stop_after);

  ASSERT_EQ(static_cast<int64_t>(straight.steps.size()), c.expected_steps);
  ASSERT_EQ(stopped.steps.size(), straight.steps.size());
  for (size_t i = 0; i < straight.steps.size(); ++i) EXPECT_EQ(stopped.steps[i], straight.steps[i]) << "step " << i + 1;
  // The run must learn something, or equal weights would prove nothing.
  EXPECT_NE(straight.steps.front().loss, straight.steps.back().loss);
  test::expect_same_bytes(stopped.masters, straight.masters, "master weights");
  test::expect_same_bytes(stopped.optimizer_state, straight.optimizer_state, "optimizer state");

  // The resumed run's metrics.jsonl describes the whole run once: steps 1..N with the same losses.
  const std::vector<nlohmann::json> metrics = test::read_jsonl(dir / "stopped" / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), straight.steps.size());
  for (size_t i = 0; i < metrics.size(); ++i) {
    EXPECT_EQ(metrics[i]["step"].get<int64_t>(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(metrics[i]["loss"].get<double>(), straight.steps[i].loss) << "metrics.jsonl step " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TrainerResume,
    ::testing::Values(
        ResumeCase{"adamw", [](TrainOptions&) {}, 3, 6},
        ResumeCase{"grad_accum", [](TrainOptions& o) { o.grad_accum = 3; }, 2, 6},
        // 16 samples, one a row, 3 rows a batch: 6 batches an epoch (the last of one
        // row), 12 steps; the resumed part crosses into epoch 2.
        ResumeCase{"epochs",
                   [](TrainOptions& o) {
                     o.max_steps = 0;
                     o.epochs = 2;
                     o.batch = 3;
                   },
                   4, 12},
        // 12 batches in steps of 5, 5 and 2 micro-batches: resumed at step 1, step 2
        // spans the epoch boundary and step 3 is the short last one.
        ResumeCase{"epochs_grad_accum",
                   [](TrainOptions& o) {
                     o.max_steps = 0;
                     o.epochs = 2;
                     o.batch = 3;
                     o.grad_accum = 5;
                   },
                   1, 3},
        // --steps-per-epoch 2 of 6 batches an epoch in steps of 2: each epoch
        // leaves its last 2 batches; resumed mid-epoch 1.
        ResumeCase{"steps_per_epoch",
                   [](TrainOptions& o) {
                     o.max_steps = 0;
                     o.epochs = 3;
                     o.batch = 3;
                     o.grad_accum = 2;
                     o.steps_per_epoch = 2;
                   },
                   3, 6},
        ResumeCase{"adamw8bit", [](TrainOptions& o) { o.optimizer = "adamw8bit"; }, 2, 6},
        ResumeCase{"bf16_masters_stochastic_rounding", [](TrainOptions& o) { o.bf16_master = true; }, 4, 6},
        ResumeCase{"w4a4_2d_blocks",
                   [](TrainOptions& o) {
                     o.qat = QatMode::W4A4;
                     o.block = Nvfp4Block::Tile16x16;
                   },
                   3, 6},
        // DPO: the reference log-probabilities are recomputed from the starting
        // model by the resumed process, the same bits.
        ResumeCase{"dpo",
                   [](TrainOptions& o) {
                     o.objective = TrainObjective::Dpo;
                     o.beta = 0.5;
                     o.data = test::write_preference_jsonl(fs::path(o.data).parent_path() / "prefs.jsonl", 12).string();
                   },
                   3, 6},
        // DPO over LoRA adapters: the reference is the base (the adapters start at
        // zero); IPO.
        ResumeCase{"dpo_lora_ipo",
                   [](TrainOptions& o) {
                     o.objective = TrainObjective::Dpo;
                     o.dpo_loss = PreferenceLossType::Ipo;
                     o.lora_rank = 4;
                     o.data = test::write_preference_jsonl(fs::path(o.data).parent_path() / "prefs.jsonl", 12).string();
                   },
                   2, 6},
        // LoRA: the checkpoint holds the adapters and their optimizer state only.
        ResumeCase{"lora",
                   [](TrainOptions& o) {
                     o.lora_rank = 4;
                     o.lora_alpha = 8;
                     o.lr = 1e-2;
                   },
                   3, 6}),
    [](const ::testing::TestParamInfo<ResumeCase>& info) { return info.param.name; });

TEST(TrainerResume, ShortLastStepOfAnEpochsRunHasTheRemainingMicroBatches) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 16);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.max_steps = 0;
  options.epochs = 2;
  options.batch = 3;
  options.grad_accum = 5;
  Trainer trainer(options, {});
  ASSERT_EQ(trainer.total_steps(), 3);
  std::vector<int> micro_batches;
  int64_t loss_tokens = 0;
  while (!trainer.done()) {
    const StepMetrics m = trainer.train_step();
    micro_batches.push_back(m.micro_batches);
    loss_tokens += m.loss_tokens;
  }
  EXPECT_EQ(micro_batches, (std::vector<int>{5, 5, 2}));
  // Every sample's trained tokens, twice: no batch lost or repeated.
  EXPECT_EQ(loss_tokens, 2 * trainer.dataset_summary().trained_tokens);
}

// What a kill -9 during a checkpoint write can leave (tests/train/test_checkpoint.cpp kills a real writer): an
// unfinished step-N.tmp, or a step-N whose files are cut short. --resume must skip both with a warning and continue
// from the previous complete checkpoint, still bit-identical to the run that never stopped.
TEST(TrainerResume, SkipsADamagedNewestCheckpointAndUsesThePreviousOne) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 16);
  TrainOptions options = test::tiny_train_options(data, dir / "straight");
  const RunResult straight = run_uninterrupted(options);

  options.output = (dir / "crashed").string();
  options.save_every = 2;
  options.keep = 5;
  std::vector<StepRecord> first_steps;
  {
    Trainer trainer(options, {});
    for (int i = 0; i < 4; ++i) {
      first_steps.push_back(record_of(trainer.train_step()));
      if (trainer.step() % 2 == 0) trainer.save_checkpoint();
    }
  }
  const fs::path newest = checkpoint_dir(options.output, 4);
  const fs::path model_file = newest / kModelFileName;
  fs::resize_file(model_file, fs::file_size(model_file) / 2);
  fs::create_directories(fs::path(options.output) / "step-6.tmp");
  test::write_file(fs::path(options.output) / "step-6.tmp" / kModelFileName, "partial");

  options.resume = true;
  testing::internal::CaptureStderr();
  std::optional<Trainer> resumed;
  resumed.emplace(options, std::set<std::string>{});
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(resumed->resumed_from(), 2);
  EXPECT_NE(log.find("skipping checkpoint " + newest.string()), std::string::npos) << log;

  RunResult result;
  for (size_t i = 0; i < 2; ++i) result.steps.push_back(first_steps[i]);
  finish(*resumed, result);
  ASSERT_EQ(result.steps.size(), straight.steps.size());
  for (size_t i = 0; i < straight.steps.size(); ++i) EXPECT_EQ(result.steps[i], straight.steps[i]) << "step " << i + 1;
  test::expect_same_bytes(result.masters, straight.masters, "master weights");
}

TEST(TrainerResume, WithoutResumeARunDirectoryWithCheckpointsIsRefused) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 8);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.max_steps = 1;
  Trainer(options, {}).run();
  const std::string before = test::read_file(dir / "run" / "metrics.jsonl");
  test::expect_error([&] { Trainer again(options, {}); }, {"already holds checkpoints", "--resume"});
  EXPECT_EQ(test::read_file(dir / "run" / "metrics.jsonl"), before);  // nothing overwritten
}

TEST(TrainerResume, AChangedIdentitySettingIsRefusedAndAScheduleChangeWarns) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 8);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.max_steps = 2;
  Trainer(options, {}).run();

  TrainOptions changed = options;
  changed.resume = true;
  changed.seq_len = 48;
  test::expect_error([&] { Trainer resumed(changed, {"seq_len"}); }, {"--seq-len is 48", "started with 64"});
  // Not given again: the saved value is used, whatever the struct holds.
  {
    Trainer reused(changed, {});  // holds the run directory's lock until it goes
    EXPECT_EQ(reused.options().seq_len, 64);
  }

  changed = options;
  changed.resume = true;
  changed.max_steps = 4;
  testing::internal::CaptureStderr();
  Trainer longer(changed, {"max_steps"});
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(longer.total_steps(), 4);
  EXPECT_NE(log.find("--max-steps 4 (was 2)"), std::string::npos) << log;
}

}  // namespace
}  // namespace nvfp4lm::test_trainer_resume
