// `train --objective dpo` learns a preference (issue 50): on the tiny fixture model, pairs of additions whose chosen
// completion answers ("3 plus 5 is 8.") and whose rejected one refuses ("I do not know."), 24 pairs to train on and
// 8 held-out pairs with other questions. Before the first step the policy is its own reference (margin 0, no pair
// right, loss log 2); after 24 steps the held-out pairs' reward margin and accuracy are up, full-parameter QAT and
// LoRA alike. The step and evaluation records carry TRL's metric names.
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_trainer_dpo {
namespace {

using test::TempDir;

TrainOptions dpo_options(const TempDir& dir) {
  TrainOptions options = test::tiny_train_options(test::write_preference_jsonl(dir / "train.jsonl", 24), dir / "run");
  options.eval_data = test::write_preference_jsonl(dir / "held_out.jsonl", 8, 40).string();
  options.objective = TrainObjective::Dpo;
  options.max_steps = 24;
  options.lr = 1e-3;
  options.beta = 0.1;
  options.eval_every = 12;
  return options;
}

void check_learns(TrainOptions options) {
  Trainer trainer(options, {});
  const EvalMetrics before = trainer.evaluate();
  ASSERT_TRUE(before.preference.has_value());
  EXPECT_EQ(before.preference->pairs, 8);
  EXPECT_NEAR(before.preference->margin, 0.0, 1e-6);
  EXPECT_EQ(before.preference->accuracy, 0.0);  // no chosen reward is above its rejected one: they are all 0
  EXPECT_NEAR(before.loss, std::log(2.0), 1e-6);
  const TrainSummary summary = trainer.run();
  EXPECT_EQ(summary.steps, 24);
  const EvalMetrics after = trainer.evaluate();
  EXPECT_GT(after.preference->margin, 1.0) << "held-out reward margin";
  EXPECT_GE(after.preference->accuracy, 0.99) << "held-out pairs whose chosen reward is higher";
  EXPECT_LT(after.loss, 0.5 * std::log(2.0));
  EXPECT_LT(after.preference->rejected_reward, 0.0);

  const std::vector<nlohmann::json> metrics = test::read_jsonl(fs::path(options.output) / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), 24u);
  for (const char* key : {"pairs", "rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies",
                          "logps/chosen", "logps/rejected"})
    EXPECT_TRUE(metrics.back().contains(key)) << key;
  EXPECT_EQ(metrics.back()["pairs"], 2);  // --batch 2 pairs
  EXPECT_TRUE(metrics.back().contains("eval_rewards/accuracies"));
  EXPECT_FALSE(metrics.back().contains("eval_perplexity"));
  const double margin = metrics.back()["rewards/margins"].get<double>();
  EXPECT_NEAR(margin, metrics.back()["rewards/chosen"].get<double>() - metrics.back()["rewards/rejected"].get<double>(),
              1e-9);
}

TEST(TrainerDpo, FullParameterQatRaisesTheHeldOutMarginAndAccuracy) {
  TempDir dir;
  check_learns(dpo_options(dir));
}

TEST(TrainerDpo, LoraOverTheFrozenBaseRaisesTheHeldOutMarginAndAccuracy) {
  TempDir dir;
  TrainOptions options = dpo_options(dir);
  options.lora_rank = 8;
  options.lr = 5e-3;
  check_learns(options);
}

TEST(TrainerDpo, SettingsThatDoNotMixAreRefused) {
  TempDir dir;
  TrainOptions options = dpo_options(dir);
  options.loss = LossKind::L1;
  EXPECT_THROW(validate_train_options(options), Error);
  options = dpo_options(dir);
  options.objective = TrainObjective::Sft;
  options.beta = 0.5;
  EXPECT_THROW(validate_train_options(options), Error);
  options = dpo_options(dir);
  options.beta = 0;
  EXPECT_THROW(validate_train_options(options), Error);
  options = dpo_options(dir);
  options.data_format = DataFormat::Tsv;
  EXPECT_THROW(validate_train_options(options), Error);
  // SFT data is not preference data: the reader names what is missing.
  options = dpo_options(dir);
  options.data = test::write_pairs_jsonl(dir / "sft.jsonl", 4).string();
  options.output = (dir / "sft-run").string();
  try {
    Trainer trainer(options, {});
    ADD_FAILURE() << "SFT pairs were trained as preference pairs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing \"chosen\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nvfp4lm::test_trainer_dpo
