// Qwen3Trainable against the PyTorch fixtures: loss and every parameter gradient for plain fine-tuning, NVFP4
// W4A16 QAT (1x16 blocks, shared q/k/v and gate/up tensor scales), packed rows, a tied lm_head; the 16x16-block
// QAT forward; and train_last_layers (frozen parameters get no gradient, trained ones the full run's).
// Gradients are compared per tensor as max |ours - reference| / max |reference| < 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "model_test_util.h"
#include "ops/elementwise.h"

namespace nvfp4lm::test::test_qwen3_gradients {
namespace {

constexpr double kGradBound = 1e-4;
constexpr double kLossBound = 1e-5;  // relative

struct Case {
  bool tied;
  const char* prefix;
  QatMode qat;
  bool packed;
};

void check_gradients(const Case& c) {
  const Reference ref(c.tied);
  TrainModelOptions options;
  options.qat = c.qat;
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(c.tied), options);
  const TrainBatch batch = ref.batch(c.packed);
  const int64_t tokens = count_loss_tokens(batch);
  const LossStats stats = model.forward_backward(batch, 1.0f / static_cast<float>(tokens));
  const std::string what = std::string(c.tied ? "tied " : "") + (c.prefix[0] ? c.prefix : "plain.");
  EXPECT_EQ(stats.tokens, tokens);
  EXPECT_EQ(stats.correct, argmax_hits(ref.get(std::string(c.prefix) + "logits"), batch.targets)) << what;
  const double ref_loss = ref.get(std::string(c.prefix) + "loss").data<float>()[0];
  EXPECT_NEAR(stats.mean(), ref_loss, kLossBound * ref_loss) << what << " loss";

  int checked = 0;
  for (const Parameter& p : model.parameters()) {
    const std::string key = std::string(c.prefix) + "grad." + p.name;
    ASSERT_TRUE(ref.has(key)) << key;
    expect_rel_close(p.grad, ref.get(key), kGradBound, what + " grad of " + p.name);
    ++checked;
  }
  const int expected = 2 + 11 * 2 + (c.tied ? 0 : 1);  // embedding, final norm, 11 per layer, lm_head
  EXPECT_EQ(checked, expected);
  // The model's forward weights give the reference logits too.
  const Tensor logits =
      model.inference_model().forward(batch.ids, batch.positions.defined() ? &batch.positions : nullptr,
                                      batch.segment_ids.defined() ? &batch.segment_ids : nullptr);
  expect_rel_close(logits, ref.get(std::string(c.prefix) + "logits"), kGradBound, what + " logits");
}

TEST(Qwen3Gradients, Plain) { check_gradients({false, "", QatMode::Off, false}); }
TEST(Qwen3Gradients, QatW4A16) { check_gradients({false, "qat.", QatMode::W4A16, false}); }
TEST(Qwen3Gradients, PackedRows) { check_gradients({false, "packed.", QatMode::Off, true}); }
TEST(Qwen3Gradients, TiedPlain) { check_gradients({true, "", QatMode::Off, false}); }
TEST(Qwen3Gradients, TiedQatW4A16) { check_gradients({true, "qat.", QatMode::W4A16, false}); }

TEST(Qwen3Gradients, Qat2dForward) {
  const Reference ref(false);
  TrainModelOptions options;
  options.block = Nvfp4Block::Tile16x16;
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), options);
  const TrainBatch batch = ref.batch(false);
  const LossStats stats = model.evaluate(batch);
  const double ref_loss = ref.get("qat2d.loss").data<float>()[0];
  EXPECT_NEAR(stats.mean(), ref_loss, kLossBound * ref_loss);
  expect_rel_close(model.inference_model().forward(batch.ids), ref.get("qat2d.logits"), kGradBound, "qat2d logits");
  // 1x16 and 16x16 give different models.
  EXPECT_GT(rel_error(ref.get("qat.logits"), ref.get("qat2d.logits")).rel(), 1e-3);
}

TEST(Qwen3Gradients, EvaluateMatchesForwardBackwardLoss) {
  const Reference ref(false);
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{});
  const TrainBatch batch = ref.batch(false);
  const LossStats eval = model.evaluate(batch);
  for (const Parameter& p : model.parameters()) EXPECT_EQ(sum_squares(p.grad), 0.0) << p.name;
  const LossStats train = model.forward_backward(batch, 1.0f);
  EXPECT_EQ(eval.loss_sum, train.loss_sum);
  EXPECT_EQ(eval.correct, train.correct);
}

TEST(Qwen3Gradients, GradientsAccumulateUntilZeroGrad) {
  const Reference ref(false);
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  const TrainBatch batch = ref.batch(false);
  model.forward_backward(batch, 0.5f);
  std::map<std::string, Tensor> once;
  for (const Parameter& p : model.parameters()) once[p.name] = p.grad.clone();
  model.forward_backward(batch, 0.5f);
  for (const Parameter& p : model.parameters()) {
    Tensor twice = once[p.name].clone();
    float* v = twice.data<float>();
    for (int64_t i = 0; i < twice.numel(); ++i) v[i] *= 2.0f;
    expect_rel_close(p.grad, twice, 1e-6, "accumulated grad of " + p.name);
  }
  model.zero_grad();
  for (const Parameter& p : model.parameters()) EXPECT_EQ(sum_squares(p.grad), 0.0) << p.name;
}

TEST(Qwen3Gradients, TrainLastLayers) {
  const Reference ref(false);
  Qwen3Trainable full = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{});
  TrainModelOptions options;
  options.train_last_layers = 1;
  Qwen3Trainable last = Qwen3Trainable::from_files(*open_tiny(false), options);
  EXPECT_EQ(last.first_trained_layer(), 1);
  EXPECT_EQ(last.master_weights().size(), full.master_weights().size());
  ASSERT_EQ(last.parameters().size(), 11u);
  const TrainBatch batch = ref.batch(false);
  const LossStats a = full.forward_backward(batch, 0.1f);
  const LossStats b = last.forward_backward(batch, 0.1f);
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  std::map<std::string, Tensor> full_grads;
  for (const Parameter& p : full.parameters()) full_grads[p.name] = p.grad;
  for (const Parameter& p : last.parameters()) {
    EXPECT_EQ(p.name.rfind("model.layers.1.", 0), 0u) << p.name << " should be frozen";
    expect_rel_close(p.grad, full_grads.at(p.name), 1e-6, "train_last_layers grad of " + p.name);
  }
  // Nothing trains: the loss is still computed.
  options.train_last_layers = 0;
  Qwen3Trainable none = Qwen3Trainable::from_files(*open_tiny(false), options);
  EXPECT_TRUE(none.parameters().empty());
  EXPECT_EQ(none.forward_backward(batch, 1.0f).loss_sum, a.loss_sum);
  options.train_last_layers = 3;
  EXPECT_THROW(Qwen3Trainable::from_files(*open_tiny(false), options), Error);
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_gradients
