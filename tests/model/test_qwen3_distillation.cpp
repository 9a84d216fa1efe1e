// Distillation through Qwen3Trainable (TrainLoss with a teacher; ops/distillation.h for the loss): on the tiny
// fixture models (the untied one as student, the tied one as teacher: one vocabulary, other weights)
//  - the KL the model reports is the one computed in double from the two models' own logits (inference_model()),
//    and the agreement count is theirs;
//  - every parameter's gradient follows central finite differences of the loss (the teacher stays fixed), in a
//    plain and in a packed batch;
//  - weight 0 is plain cross-entropy; a student distilled from a copy of itself has KL 0 and no gradient;
//  - the teacher gets no gradient and keeps its weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model_test_util.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"

namespace nvfp4lm::test::test_qwen3_distillation {
namespace {

TrainLoss distill_from(Qwen3Trainable& teacher, float temperature, float weight) {
  TrainLoss loss;
  loss.teacher = &teacher;
  loss.distillation = {temperature, weight};
  return loss;
}

// Σ over the batch's targeted positions of KL(softmax(t/τ) ‖ softmax(z/τ)), in double from both models' logits, and
// the positions where both argmaxes agree.
std::pair<double, int64_t> kl_from_logits(const Tensor& student_logits, const Tensor& teacher_logits,
                                          const Tensor& targets, double tau) {
  const int64_t vocab = student_logits.dim(2), rows = student_logits.numel() / vocab;
  const float* z = student_logits.data<float>();
  const float* t = teacher_logits.data<float>();
  const int32_t* target = targets.data<int32_t>();
  double kl = 0;
  int64_t agree = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (target[i] == kIgnoreIndex) continue;
    const float* zi = z + i * vocab;
    const float* ti = t + i * vocab;
    auto log_softmax = [&](const float* x, int64_t v) {
      const double max = *std::max_element(x, x + vocab);
      double sum = 0;
      for (int64_t k = 0; k < vocab; ++k) sum += std::exp((x[k] - max) / tau);
      return (x[v] - max) / tau - std::log(sum);
    };
    for (int64_t v = 0; v < vocab; ++v) {
      const double log_p = log_softmax(ti, v), log_q = log_softmax(zi, v);
      kl += std::exp(log_p) * (log_p - log_q);
    }
    agree += (std::max_element(zi, zi + vocab) - zi) == (std::max_element(ti, ti + vocab) - ti);
  }
  return {kl, agree};
}

TEST(Qwen3Distillation, KlIsTheOneOfTheTwoModelsLogits) {
  const Reference ref(false);
  Qwen3Trainable student = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  Qwen3Trainable teacher = frozen_tiny_teacher(true, 40.0f);
  for (const bool packed : {false, true}) {
    const TrainBatch batch = ref.batch(packed);
    const Tensor* positions = batch.positions.defined() ? &batch.positions : nullptr;
    const Tensor* segments = batch.segment_ids.defined() ? &batch.segment_ids : nullptr;
    const Tensor z = student.inference_model().forward(batch.ids, positions, segments);
    const Tensor t = teacher.inference_model().forward(batch.ids, positions, segments);
    for (const float tau : {1.0f, 2.0f}) {
      const auto [kl, agree] = kl_from_logits(z, t, batch.targets, tau);
      const LossStats stats = student.evaluate(batch, distill_from(teacher, tau, 1.0f));
      EXPECT_GT(kl, 0.1 * static_cast<double>(stats.tokens));
      EXPECT_NEAR(stats.kl_sum, kl, 1e-4 * kl) << "packed " << packed << " tau " << tau;
      EXPECT_NEAR(stats.loss_sum, tau * tau * kl, 1e-4 * tau * tau * kl);
      EXPECT_EQ(stats.agree, agree);
      EXPECT_EQ(stats.tokens, count_loss_tokens(batch));
    }
  }
}

// d loss / d parameter for the elements of largest gradient in each tensor, against (L(θ+ε) - L(θ-ε)) / 2ε of the
// model's own (fp32) loss: the whole chain — the student's backward through the fused distillation head — with the
// teacher's forward recomputed each time and never changed.
void check_finite_differences(bool packed) {
  const Reference ref(false);
  Qwen3Trainable student = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  Qwen3Trainable teacher = frozen_tiny_teacher(true, 40.0f);
  const TrainBatch batch = ref.batch(packed);
  const TrainLoss loss = distill_from(teacher, 1.5f, 0.7f);
  const float grad_scale = 1.0f / static_cast<float>(count_loss_tokens(batch));
  const int checked =
      check_gradients_by_finite_differences(student, batch, loss, grad_scale, packed ? "packed" : "plain");
  EXPECT_EQ(checked, 2 + 11 * 2 + 1);  // embedding, final norm, 11 per layer, lm_head
  for (const Parameter& p : teacher.parameters()) ADD_FAILURE() << "the teacher trains " << p.name;
}

TEST(Qwen3Distillation, GradientsFollowFiniteDifferences) { check_finite_differences(false); }
TEST(Qwen3Distillation, GradientsFollowFiniteDifferencesInPackedRows) { check_finite_differences(true); }

TEST(Qwen3Distillation, WeightZeroIsCrossEntropyAndACopyOfItselfTeachesNothing) {
  const Reference ref(false);
  const TrainBatch batch = ref.batch(false);
  Qwen3Trainable teacher = frozen_tiny_teacher(true);
  Qwen3Trainable plain = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  Qwen3Trainable mixed = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  const LossStats ce = plain.forward_backward(batch, 0.25f);
  const LossStats none = mixed.forward_backward(batch, 0.25f, distill_from(teacher, 2.0f, 0.0f));
  EXPECT_NEAR(none.loss_sum, ce.loss_sum, 1e-6 * ce.loss_sum);
  EXPECT_EQ(none.correct, ce.correct);
  for (size_t i = 0; i < plain.parameters().size(); ++i) {
    expect_rel_close(mixed.parameters()[i].grad, plain.parameters()[i].grad, 1e-5,
                     "weight 0: grad of " + plain.parameters()[i].name);
  }

  Qwen3Trainable self = frozen_tiny_teacher(false);
  Qwen3Trainable student = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  const LossStats same = student.forward_backward(batch, 1.0f, distill_from(self, 1.0f, 1.0f));
  EXPECT_NEAR(same.kl_sum, 0.0, 1e-5 * static_cast<double>(same.tokens));
  EXPECT_EQ(same.agree, same.tokens);
  for (const Parameter& p : student.parameters()) EXPECT_LT(std::sqrt(sum_squares(p.grad)), 1e-4) << p.name;
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_distillation
