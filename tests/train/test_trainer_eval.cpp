// Evaluation during training (trainer.h): --eval-split holds out every 1/F-th sample; the evaluation runs every
// --eval-every steps and after the last one, its loss lands in the step's metrics.jsonl record and equals
// `nvfp4lm eval` (tools/eval.h) of the exported NVFP4 model on the same file with --seq-len T --stride T - 1 (the
// training split), to 1e-5; a run stopped and resumed gives the same step and evaluation losses bit for bit (also
// with --save-best, whose checkpoint stays on disk whatever --keep prunes); prune_checkpoints keeps also_keep.
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "model/qwen3_model.h"
#include "tokenizer/tokenizer.h"
#include "tools/eval.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_trainer_eval {
namespace {

using test::TempDir;

TEST(TrainerEval, SplitHoldsOutEveryTwentiethSampleAndEvaluatesOnSchedule) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 40);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.eval_split = 0.05;
  options.eval_every = 4;
  options.max_steps = 6;
  Trainer trainer(options, {});
  EXPECT_EQ(trainer.eval_samples(), 2);
  EXPECT_EQ(trainer.dataset_summary().samples, 40);
  trainer.run();
  const std::vector<nlohmann::json> records = test::read_jsonl(dir / "run" / "metrics.jsonl");
  ASSERT_EQ(records.size(), 6u);
  for (const nlohmann::json& record : records) {
    const int64_t step = record["step"].get<int64_t>();
    EXPECT_EQ(record.contains("eval_loss"), step == 4 || step == 6) << record.dump();
  }
  EXPECT_NEAR(records[5]["eval_perplexity"].get<double>(), std::exp(records[5]["eval_loss"].get<double>()), 1e-9);
  EXPECT_TRUE(records[3]["eval_best"].get<bool>());
}

TEST(TrainerEval, EvalLossEqualsEvalOfTheExportOnTheSameFile) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 10);
  const fs::path held_out = test::write_pairs_jsonl(dir / "held.jsonl", 13);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.eval_data = held_out.string();
  options.max_steps = 3;
  options.export_path = (dir / "export").string();
  Trainer trainer(options, {});
  double eval_loss = 0;
  Trainer::Progress progress;
  progress.on_step = [&](const StepMetrics& m) {
    if (m.eval) eval_loss = m.eval->loss;
  };
  trainer.run(progress);
  ASSERT_NE(eval_loss, 0.0);

  ModelOptions model_options;
  model_options.tokenizer_dir = test::tiny_tokenizer_dir();
  const Qwen3Model exported = Qwen3Model::load(dir / "export", model_options);
  EvalOptions eval;
  eval.data = held_out;
  eval.seq_len = options.seq_len;
  eval.stride = options.seq_len - 1;
  const EvalResult result = evaluate_model(exported, Tokenizer::load(test::tiny_tokenizer_dir()), nullptr, eval);
  EXPECT_NEAR(result.loss, eval_loss, 1e-5);
}

struct Record {
  double loss = 0;
  std::optional<double> eval_loss;
  bool operator==(const Record&) const = default;
};

TEST(TrainerEval, ResumeIsBitIdenticalAndTheBestCheckpointSurvivesPruning) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 24);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.eval_split = 0.25;
  options.eval_every = 1;
  options.save_best = true;
  options.keep = 1;
  options.max_steps = 6;
  options.lr = 2e-2;  // large enough that the evaluation loss does not only fall
  auto record = [](const StepMetrics& m) {
    return Record{m.loss, m.eval ? std::optional<double>(m.eval->loss) : std::nullopt};
  };
  std::vector<Record> uninterrupted;
  TrainSummary summary;
  {
    Trainer trainer(options, {});
    Trainer::Progress progress;
    progress.on_step = [&](const StepMetrics& m) { uninterrupted.push_back(record(m)); };
    summary = trainer.run(progress);
  }
  ASSERT_EQ(uninterrupted.size(), 6u);
  ASSERT_GT(summary.best_eval_step, 0);
  ASSERT_TRUE(summary.best_checkpoint);
  EXPECT_TRUE(fs::is_directory(*summary.best_checkpoint));
  double best = INFINITY;
  int64_t best_step = 0;
  for (size_t i = 0; i < uninterrupted.size(); ++i) {
    ASSERT_TRUE(uninterrupted[i].eval_loss);
    if (*uninterrupted[i].eval_loss < best) {
      best = *uninterrupted[i].eval_loss;
      best_step = static_cast<int64_t>(i + 1);
    }
  }
  EXPECT_EQ(summary.best_eval_step, best_step);
  EXPECT_EQ(summary.best_eval_loss, best);
  for (int64_t step = 1; step <= 6; ++step)
    EXPECT_EQ(fs::is_directory(checkpoint_dir(dir / "run", step)), step == 6 || step == best_step) << step;

  TrainOptions split = options;
  split.output = (dir / "run2").string();
  std::vector<Record> resumed;
  {
    Trainer trainer(split, {});
    for (int i = 0; i < 3; ++i) resumed.push_back(record(trainer.train_step()));
    trainer.save_checkpoint();
  }
  split.resume = true;
  Trainer second(split, {});
  Trainer::Progress progress;
  progress.on_step = [&](const StepMetrics& m) { resumed.push_back(record(m)); };
  const TrainSummary resumed_summary = second.run(progress);
  EXPECT_EQ(resumed, uninterrupted);
  EXPECT_EQ(resumed_summary.best_eval_step, summary.best_eval_step);
}

TEST(TrainerEval, PruningKeepsTheCheckpointItIsTold) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 8);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.max_steps = 4;
  options.save_every = 1;
  options.keep = 4;
  Trainer(options, {}).run();
  prune_checkpoints(dir / "run", 1, VerifyLevel::Sizes, int64_t{2});
  for (int64_t step = 1; step <= 4; ++step)
    EXPECT_EQ(fs::is_directory(checkpoint_dir(dir / "run", step)), step == 2 || step == 4) << step;
}

TEST(TrainerEval, EvaluationFlagsNeedEvaluationData) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 8);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.eval_every = 2;
  test::expect_error([&] { validate_train_options(options); }, {"--eval-every", "--eval-data", "--eval-split"});
  options.eval_every = 0;
  options.save_best = true;
  test::expect_error([&] { validate_train_options(options); }, {"--save-best", "--eval-data"});
  options.save_best = false;
  options.eval_split = 0.1;
  options.eval_data = data.string();
  test::expect_error([&] { validate_train_options(options); }, {"--eval-data", "--eval-split", "not both"});
  options.eval_data.clear();
  options.eval_split = 0.05;  // 8 samples: none held out
  test::expect_error([&] { Trainer(options, {}); }, {"--eval-split 0.05", "holds out none"});
}

}  // namespace
}  // namespace nvfp4lm::test_trainer_eval
