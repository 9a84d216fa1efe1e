// The optimizer step fused into the backward (TrainModelOptions::fused_update, train/train_step.h, --fused-update):
//  - several steps give bit-identical weights, optimizer state and losses to separate forward/backward + step
//    (no clipping) for both optimizers, fp32 and bf16 masters, QAT modes, tied and untied heads, with recompute;
//  - gradient memory drops to one block's (the backward's peak);
//  - a non-finite loss cancels the step; non-finite gradients skip their groups;
//  - the trainer runs it end to end (metrics, checkpoints), and refuses --grad-accum > 1 and clipping;
//  - the optimizer's split-step API refuses misuse.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/memory.h"
#include "io/synth_model.h"
#include "model/qwen3_trainable.h"
#include "train/optim/grad_clip.h"
#include "train/train_step.h"
#include "train/trainer.h"
#include "trainer_test_support.h"
#include "update_refresh_support.h"

namespace nvfp4lm::test::test_fused_update {
namespace {

struct TrainRun {
  std::vector<double> losses;
  std::vector<double> norms;
  std::map<std::string, std::string> weights, state;
  int64_t optimizer_steps = 0;
};

TrainRun train(const ModelFiles& files, TrainModelOptions options, const std::string& optimizer_kind, bool fused,
               int steps) {
  options.fused_update = fused;
  Qwen3Trainable model = Qwen3Trainable::from_files(files, options);
  AdamWOptions adamw;
  adamw.seed = 9;
  std::unique_ptr<Optimizer> optimizer = make_optimizer(optimizer_kind, model.parameters(), adamw);
  TrainRun run;
  for (int step = 0; step < steps; ++step) {
    const TrainBatch batch = random_batch(2, 16, files.config().vocab_size, 100 + static_cast<uint64_t>(step));
    const auto grad_scale = static_cast<float>(1.0 / static_cast<double>(count_loss_tokens(batch)));
    const double lr = 3e-3 * (step + 1);
    model.zero_grad();
    if (fused) {
      const FusedStepResult r = fused_train_step(model, *optimizer, batch, grad_scale, LossKind::CrossEntropy, lr);
      EXPECT_TRUE(r.applied);
      EXPECT_TRUE(r.skipped_groups.empty());
      run.losses.push_back(r.stats.loss_sum);
      run.norms.push_back(r.grad_norm);
    } else {
      const LossStats stats = model.forward_backward(batch, grad_scale);
      run.losses.push_back(stats.loss_sum);
      run.norms.push_back(grad_norm(model.parameters()));
      optimizer->step(model.parameters(), lr);
      model.refresh_quantized();
    }
  }
  run.weights = tensor_bytes(model.master_weights());
  run.state = tensor_bytes(optimizer->state_tensors());
  run.optimizer_steps = optimizer->step_count();
  return run;
}

TEST(FusedUpdate, BitIdenticalToASeparateStep) {
  const std::unique_ptr<ModelFiles> untied = random_model_files(small_config(false), "untied", 1);
  const std::unique_ptr<ModelFiles> tied = random_model_files(small_config(true), "tied", 2);
  struct Case {
    const char* name;
    const ModelFiles* files;
    TrainModelOptions options;
    const char* optimizer;
  };
  std::vector<Case> cases;
  cases.push_back({"untied w4a16 adamw", untied.get(), TrainModelOptions{QatMode::W4A16}, "adamw"});
  cases.push_back({"tied w4a16 adamw8bit", tied.get(), TrainModelOptions{QatMode::W4A16}, "adamw8bit"});
  TrainModelOptions bf16{QatMode::W4A16};
  bf16.bf16_master = true;
  bf16.recompute = Recompute::Block;
  cases.push_back({"tied bf16 masters + recompute, adamw8bit", tied.get(), bf16, "adamw8bit"});
  TrainModelOptions low_memory{QatMode::W4A16};  // the low-memory recipe: everything on at once
  low_memory.bf16_master = true;
  low_memory.recompute = Recompute::Block;
  low_memory.packed_weights = true;
  cases.push_back({"tied bf16 masters + recompute + packed weights, adamw8bit", tied.get(), low_memory, "adamw8bit"});
  TrainModelOptions w4a4{QatMode::W4A4};
  w4a4.quantize_lm_head = true;
  cases.push_back({"untied w4a4 quantized head, adamw", untied.get(), w4a4, "adamw"});
  TrainModelOptions head_tied{QatMode::W4A16};
  head_tied.quantize_lm_head = true;
  cases.push_back({"tied quantized head", tied.get(), head_tied, "adamw"});
  cases.push_back({"untied qat off", untied.get(), TrainModelOptions{QatMode::Off}, "adamw"});
  TrainModelOptions last{QatMode::W4A16};
  last.train_last_layers = 2;
  cases.push_back({"last 2 layers", untied.get(), last, "adamw"});
  TrainModelOptions lora{QatMode::W4A16};  // adapters, per layer, over the packed base; dropout's mask per batch
  lora.lora.rank = 4;
  lora.lora.dropout = 0.1;
  lora.recompute = Recompute::Block;
  cases.push_back({"LoRA rank 4 + dropout + recompute, adamw8bit", tied.get(), lora, "adamw8bit"});
  lora.lora.targets = parse_lora_targets("q,v");
  lora.train_last_layers = 1;
  cases.push_back({"LoRA on q,v of the last layer, adamw", untied.get(), lora, "adamw"});

  for (const Case& c : cases) {
    const TrainRun separate = train(*c.files, c.options, c.optimizer, false, 3);
    const TrainRun fused = train(*c.files, c.options, c.optimizer, true, 3);
    EXPECT_EQ(fused.losses, separate.losses) << c.name;
    for (size_t i = 0; i < fused.norms.size(); ++i)
      EXPECT_NEAR(fused.norms[i], separate.norms[i], 1e-12 * separate.norms[i]) << c.name << " step " << i;
    EXPECT_EQ(fused.optimizer_steps, 3) << c.name;
    expect_same_bytes(fused.weights, separate.weights, std::string(c.name) + " weights");
    expect_same_bytes(fused.state, separate.state, std::string(c.name) + " optimizer state");
    EXPECT_NE(fused.weights, train(*c.files, c.options, c.optimizer, true, 0).weights) << c.name << ": no update";
  }
}

TEST(FusedUpdate, KeepsOneBlockOfGradients) {
  Qwen3Config config = small_config(false);
  config.num_hidden_layers = 8;
  const std::unique_ptr<ModelFiles> files = random_model_files(config, "eight-layer", 4);
  size_t grad_bytes[2] = {0, 0};
  size_t backward_peak[2] = {0, 0};
  for (int fused = 0; fused < 2; ++fused) {
    MemoryTracker& tracker = MemoryTracker::instance();
    const size_t before = tracker.current_bytes(Device::cpu());
    TrainModelOptions options{QatMode::W4A16};
    options.fused_update = fused != 0;
    options.recompute = Recompute::Block;
    Qwen3Trainable model = Qwen3Trainable::from_files(*files, options);
    std::unique_ptr<Optimizer> optimizer = make_optimizer("adamw", model.parameters(), AdamWOptions{});
    grad_bytes[fused] = tracker.current_bytes(Device::cpu()) - before;  // masters + uses + grads + state
    tracker.clear_phases();
    const TrainBatch batch = random_batch(2, 32, config.vocab_size, 3);
    if (fused != 0) {
      fused_train_step(model, *optimizer, batch, 0.01f, LossKind::CrossEntropy, 1e-3);
    } else {
      model.forward_backward(batch, 0.01f);
      optimizer->step(model.parameters(), 1e-3);
    }
    for (const PhasePeak& peak : tracker.phase_peaks())
      if (peak.phase == "backward" && peak.device.is_cpu()) backward_peak[fused] = peak.peak_bytes;
  }
  // 8 blocks of gradients become 1: the model + optimizer footprint shrinks by 7 blocks of fp32 weights.
  const Qwen3Config& c = config;
  const int64_t block = c.hidden_size * (c.q_dim() + 2 * c.kv_dim()) + c.q_dim() * c.hidden_size +
                        3 * c.hidden_size * c.intermediate_size + 2 * c.hidden_size + 2 * c.head_dim;
  EXPECT_EQ(grad_bytes[0] - grad_bytes[1], static_cast<size_t>(7 * block * 4));
  EXPECT_LT(backward_peak[1], backward_peak[0]);
}

TEST(FusedUpdate, NonFiniteLossCancelsAndNonFiniteGradientsSkip) {
  const std::unique_ptr<ModelFiles> files = random_model_files(small_config(false), "untied", 1);
  TrainModelOptions options{QatMode::W4A16};
  options.fused_update = true;
  Qwen3Trainable model = Qwen3Trainable::from_files(*files, options);
  std::unique_ptr<Optimizer> optimizer = make_optimizer("adamw", model.parameters(), AdamWOptions{});
  const auto weights = tensor_bytes(model.master_weights());
  const TrainBatch batch = random_batch(2, 16, files->config().vocab_size, 8);

  // An infinite gradient scale: the loss is finite, every gradient is not; every group keeps its weights.
  const FusedStepResult skipped = fused_train_step(model, *optimizer, batch, INFINITY, LossKind::CrossEntropy, 1e-3);
  EXPECT_TRUE(skipped.applied);
  EXPECT_TRUE(std::isfinite(skipped.stats.loss_sum));
  EXPECT_FALSE(std::isfinite(skipped.grad_norm));
  EXPECT_EQ(skipped.skipped_groups.size(), 3u + 3u);  // lm_head, final norm, 3 blocks, embedding
  EXPECT_EQ(optimizer->step_count(), 1);
  expect_same_bytes(tensor_bytes(model.master_weights()), weights, "after skipped groups");

  // A NaN in the embedding: the loss is NaN, the step is cancelled before any update.
  Tensor embed;
  for (const NamedTensor& entry : model.master_weights())
    if (entry.name == "model.embed_tokens.weight") embed = entry.tensor;
  float* values = embed.data<float>();
  for (int64_t i = 0; i < embed.numel(); ++i) values[i] = NAN;
  model.refresh_quantized();
  const auto poisoned = tensor_bytes(model.master_weights());
  const FusedStepResult cancelled = fused_train_step(model, *optimizer, batch, 0.01f, LossKind::CrossEntropy, 1e-3);
  EXPECT_FALSE(cancelled.applied);
  EXPECT_FALSE(optimizer->in_step());
  EXPECT_EQ(optimizer->step_count(), 1);
  expect_same_bytes(tensor_bytes(model.master_weights()), poisoned, "after a non-finite loss");
}

TEST(FusedUpdate, TrainerRunsItAndResumesLikeTheSeparateStep) {
  TempDir dir;
  const fs::path data = write_pairs_jsonl(dir / "pairs.jsonl", 12);
  TrainOptions separate = tiny_train_options(data, dir / "separate");
  separate.max_grad_norm = 0;
  TrainOptions fused = tiny_train_options(data, dir / "fused");
  fused.max_grad_norm = 0;
  fused.fused_update = true;
  fused.optimizer = separate.optimizer = "adamw8bit";
  Trainer(separate, {}).run();
  Trainer(fused, {}).run();
  const std::vector<nlohmann::json> a = read_jsonl(dir / "separate" / "metrics.jsonl");
  const std::vector<nlohmann::json> b = read_jsonl(dir / "fused" / "metrics.jsonl");
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i]["loss"], a[i]["loss"]) << "step " << i + 1;
    EXPECT_NEAR(b[i]["grad_norm"].get<double>(), a[i]["grad_norm"].get<double>(), 1e-9) << "step " << i + 1;
  }
}

TEST(FusedUpdate, FlagsThatCannotWorkAreErrors) {
  TrainOptions options = tiny_train_options("data.jsonl", "out");
  options.fused_update = true;
  options.max_grad_norm = 0;
  validate_train_options(options);
  options.grad_accum = 2;
  expect_error([&] { validate_train_options(options); }, {"--grad-accum 1"});
  options.grad_accum = 1;
  options.max_grad_norm = 1.0;
  expect_error([&] { validate_train_options(options); }, {"--max-grad-norm 0"});
}

TEST(FusedUpdate, OptimizerSplitStepRefusesMisuse) {
  const std::unique_ptr<ModelFiles> files = random_model_files(small_config(false), "untied", 1);
  Qwen3Trainable model = Qwen3Trainable::from_files(*files, TrainModelOptions{QatMode::Off});
  std::unique_ptr<Optimizer> optimizer = make_optimizer("adamw", model.parameters(), AdamWOptions{});
  std::span<Parameter> all = model.parameters();
  EXPECT_THROW(optimizer->update_parameters(all.subspan(0, 1)), Error);  // no step begun
  optimizer->begin_step(1e-3);
  EXPECT_THROW(optimizer->begin_step(1e-3), Error);
  optimizer->update_parameters(all.subspan(0, 2));
  EXPECT_THROW(optimizer->update_parameters(all.subspan(1, 1)), Error);  // twice in one step
  EXPECT_THROW(optimizer->cancel_step(), Error);                         // updates were made
  EXPECT_THROW(optimizer->end_step(), Error);                            // not every parameter yet
  optimizer->skip_parameters(all.subspan(2));
  optimizer->end_step();
  EXPECT_EQ(optimizer->step_count(), 1);
  EXPECT_FALSE(optimizer->in_step());
}

}  // namespace
}  // namespace nvfp4lm::test::test_fused_update
