// What a run reports (train/metrics.h): metrics.jsonl has exactly one record per optimizer step with step, loss,
// token accuracy, learning rate (the schedule's), gradient norm and tokens/s, equal to what the loop reported; the
// summary agrees with them; --memory-report writes JSON with the peak memory of each phase (load, forward,
// backward, optimizer, checkpoint, export).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/test_util.h"
#include "train/optim/lr_schedule.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_trainer_metrics {
namespace {

using json = nlohmann::json;

TEST(TrainerMetrics, OneRecordPerStepAndAMemoryReportWithEveryPhase) {
  test::TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 8);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.max_steps = 5;
  // In a directory that does not exist yet: made at the end (issue 52: the run trained, then failed there).
  options.memory_report = (dir / "reports" / "new" / "memory.json").string();
  options.export_path = (dir / "export").string();
  Trainer trainer(options, {});
  std::vector<StepMetrics> reported;
  Trainer::Progress progress;
  progress.on_step = [&](const StepMetrics& m) { reported.push_back(m); };
  const TrainSummary summary = trainer.run(progress);

  EXPECT_EQ(summary.metrics_path, dir / "run" / "metrics.jsonl");
  const std::vector<json> records = test::read_jsonl(summary.metrics_path);
  ASSERT_EQ(records.size(), 5u);
  ASSERT_EQ(reported.size(), 5u);
  double best = INFINITY;
  for (size_t i = 0; i < records.size(); ++i) {
    const json& r = records[i];
    const std::string where = "metrics.jsonl record " + std::to_string(i + 1) + ": " + r.dump();
    for (const char* key : {"step", "loss", "token_accuracy", "lr", "grad_norm", "tokens_per_s", "loss_tokens",
                            "input_tokens", "epoch", "step_s"})
      ASSERT_TRUE(r.contains(key) && r[key].is_number()) << key << " in " << where;
    EXPECT_EQ(r["step"].get<int64_t>(), static_cast<int64_t>(i + 1)) << where;
    EXPECT_EQ(r["loss"].get<double>(), reported[i].loss) << where;
    EXPECT_EQ(r["grad_norm"].get<double>(), reported[i].grad_norm) << where;
    EXPECT_EQ(r["lr"].get<double>(), lr_at(trainer.schedule(), static_cast<int64_t>(i))) << where;
    EXPECT_GT(r["loss"].get<double>(), 0) << where;
    EXPECT_GT(r["grad_norm"].get<double>(), 0) << where;
    EXPECT_GE(r["token_accuracy"].get<double>(), 0) << where;
    EXPECT_LE(r["token_accuracy"].get<double>(), 1) << where;
    EXPECT_GT(r["tokens_per_s"].get<double>(), 0) << where;
    EXPECT_GT(r["loss_tokens"].get<int64_t>(), 0) << where;
    EXPECT_GE(r["input_tokens"].get<int64_t>(), r["loss_tokens"].get<int64_t>()) << where;
    EXPECT_FALSE(r["skipped"].get<bool>()) << where;
    best = std::min(best, r["loss"].get<double>());
  }
  // Warmup 1 then cosine: the rate falls after step 2.
  EXPECT_GT(records[1]["lr"].get<double>(), records[4]["lr"].get<double>());
  EXPECT_EQ(summary.final_loss, records.back()["loss"].get<double>());
  EXPECT_EQ(summary.best_loss, best);

  ASSERT_TRUE(summary.memory_report_path.has_value());
  const json memory = json::parse(test::read_file(dir / "reports" / "new" / "memory.json"));
  EXPECT_EQ(memory["device"], "cpu");
  std::set<std::string> phases;
  for (const json& phase : memory["phases"]) {
    phases.insert(phase["phase"].get<std::string>());
    EXPECT_GT(phase["peak_bytes"].get<uint64_t>(), 0u) << phase.dump();
    EXPECT_LE(phase["peak_bytes"].get<uint64_t>(), memory["device_peak_bytes"].get<uint64_t>()) << phase.dump();
  }
  for (const char* phase : {"load", "forward", "backward", "optimizer", "checkpoint", "export"})
    EXPECT_TRUE(phases.count(phase)) << "no phase " << phase << " in " << memory.dump();
  EXPECT_GT(memory["host_peak_rss_bytes"].get<uint64_t>(), 0u);
}

}  // namespace
}  // namespace nvfp4lm::test_trainer_metrics
