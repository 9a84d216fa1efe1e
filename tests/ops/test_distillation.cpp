// Fused lm_head + distillation loss (ops/distillation.h) against a float64 reference written out here with the full
// logits: loss, KL, CE, token / correct / agreement counts, dhidden (overwritten, 0 on ignored rows) and dweight (+=),
// across several token chunks, at temperatures 1 and 2 and weights 1, 0.6 and 0; the gradients also against central
// finite differences of the float64 loss; weight 0 is the fused cross-entropy; a student equal to its teacher
// has KL 0 and (weight 1) no gradient; the teacher may be wider than the student; bad targets are Errors.
// The top-K form (lm_head_distillation_topk, a teacher cache): against the K + 1-outcome KL written out in double and
// its finite differences; K = V is the full distillation; select_teacher_top_k's order, ties and rest mass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ops/cross_entropy.h"
#include "ops/distillation.h"
#include "ops/gemm.h"
#include "ops_testing.h"

namespace nvfp4lm::test_distillation {
namespace {

struct Reference {
  double loss = 0, kl = 0, ce = 0;
  int64_t tokens = 0, correct = 0, agree = 0;
  std::vector<double> dhidden, dweight;
};

std::vector<double> logits_of(const std::vector<double>& h, const std::vector<double>& w, int64_t row, int64_t width,
                              int64_t vocab) {
  std::vector<double> z(static_cast<size_t>(vocab), 0.0);
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t j = 0; j < width; ++j)
      z[static_cast<size_t>(v)] += h[static_cast<size_t>(row * width + j)] * w[static_cast<size_t>(v * width + j)];
  return z;
}

// softmax(z / tau) in double.
std::vector<double> softmax(const std::vector<double>& z, double tau) {
  const double max = *std::max_element(z.begin(), z.end());
  std::vector<double> p(z.size());
  double sum = 0;
  for (size_t v = 0; v < z.size(); ++v) sum += p[v] = std::exp((z[v] - max) / tau);
  for (double& value : p) value /= sum;
  return p;
}

int64_t argmax(const std::vector<double>& z) { return std::max_element(z.begin(), z.end()) - z.begin(); }

// Adds one row to the reference: its KL and CE, the counts, and the gradient of grad_scale · loss through
// z = h · Wᵀ, dloss/dz_v = w τ (q_v - pull_v) + (1 - w) (softmax(z)_v - [v = target]), `pull` being the distribution
// the KL's gradient draws q = softmax(z / τ) towards (the teacher's).
void add_row(Reference& ref, int64_t row, int32_t target, double kl, const std::vector<double>& z,
             const std::vector<double>& pull, int64_t teacher_argmax, const std::vector<double>& h,
             const std::vector<double>& w, int64_t width, const DistillationSettings& s, double grad_scale) {
  const double tau = s.temperature, weight = s.weight;
  const std::vector<double> q = softmax(z, tau), s1 = softmax(z, 1.0);
  const double ce = -std::log(s1[static_cast<size_t>(target)]);
  ref.kl += kl;
  ref.ce += ce;
  ref.loss += weight * tau * tau * kl + (1 - weight) * ce;
  ref.tokens += 1;
  ref.correct += argmax(z) == target;
  ref.agree += argmax(z) == teacher_argmax;
  for (size_t v = 0; v < z.size(); ++v) {
    const double dz = grad_scale * (weight * tau * (q[v] - pull[v]) +
                                    (1 - weight) * (s1[v] - (v == static_cast<size_t>(target) ? 1 : 0)));
    for (int64_t j = 0; j < width; ++j) {
      ref.dhidden[static_cast<size_t>(row * width + j)] += dz * w[v * static_cast<size_t>(width) + j];
      ref.dweight[v * static_cast<size_t>(width) + j] += dz * h[static_cast<size_t>(row * width + j)];
    }
  }
}

// The definition of ops/distillation.h, term by term in double.
Reference reference(const std::vector<double>& h, const std::vector<double>& w, const std::vector<double>& ht,
                    const std::vector<double>& wt, const std::vector<int32_t>& targets, int64_t width,
                    int64_t teacher_width, int64_t vocab, const DistillationSettings& s, double grad_scale) {
  Reference ref;
  ref.dhidden.assign(h.size(), 0.0);
  ref.dweight.assign(w.size(), 0.0);
  const double tau = s.temperature;
  for (size_t i = 0; i < targets.size(); ++i) {
    const int32_t target = targets[i];
    if (target == kIgnoreIndex) continue;
    const auto row = static_cast<int64_t>(i);
    const std::vector<double> z = logits_of(h, w, row, width, vocab), t = logits_of(ht, wt, row, teacher_width, vocab);
    const std::vector<double> p = softmax(t, tau), q = softmax(z, tau);
    double kl = 0;
    for (size_t v = 0; v < p.size(); ++v) kl += p[v] * (std::log(p[v]) - std::log(q[v]));
    add_row(ref, row, target, kl, z, p, argmax(t), h, w, width, s, grad_scale);
  }
  return ref;
}

struct Inputs {
  Tensor hidden, lm_head, teacher_hidden, teacher_lm_head;
  std::vector<int32_t> targets;
};

// A teacher that is a perturbed copy of the student (as an NVFP4 student is of its BF16 base), wider when
// teacher_width > width (its extra columns random).
Inputs make_inputs(Rng& rng, int64_t tokens, int64_t width, int64_t teacher_width, int64_t vocab, float ignored) {
  Inputs in;
  in.hidden = test::random_normal({tokens, width}, rng);
  in.lm_head = test::random_normal({vocab, width}, rng, 0.5f);
  in.teacher_hidden = test::random_normal({tokens, teacher_width}, rng, 0.3f);
  in.teacher_lm_head = test::random_normal({vocab, teacher_width}, rng, 0.3f);
  const float* h = in.hidden.data<float>();
  const float* w = in.lm_head.data<float>();
  float* th = in.teacher_hidden.data<float>();
  float* tw = in.teacher_lm_head.data<float>();
  for (int64_t i = 0; i < tokens; ++i)
    for (int64_t j = 0; j < width; ++j) th[i * teacher_width + j] += h[i * width + j];
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t j = 0; j < width; ++j) tw[v * teacher_width + j] += w[v * width + j];
  in.targets.resize(static_cast<size_t>(tokens));
  for (auto& t : in.targets)
    t = rng.uniform() < ignored ? kIgnoreIndex : static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
  return in;
}

// The op's sums, counts and gradients against the float64 reference (dweight_total: the reference's dW plus what
// dweight held before, as the op accumulates).
void expect_matches(const DistillationResult& got, const Reference& ref, const Tensor& dhidden, const Tensor& dweight,
                    const std::vector<double>& dweight_total) {
  EXPECT_EQ(got.tokens, ref.tokens);
  EXPECT_EQ(got.correct, ref.correct);
  EXPECT_EQ(got.agree, ref.agree);
  EXPECT_NEAR(got.kl_sum, ref.kl, 1e-5 * ref.kl + 1e-6);
  EXPECT_NEAR(got.ce_sum, ref.ce, 1e-5 * ref.ce);
  EXPECT_NEAR(got.loss_sum, ref.loss, 1e-5 * ref.loss);
  test::expect_near_doubles(dhidden, ref.dhidden, test::kForwardTol, "dhidden");
  test::expect_near_doubles(dweight, dweight_total, test::kForwardTol, "dweight (+=)");
}

// Temperatures and weights both forms are checked at.
const DistillationSettings kSettingsGrid[] = {{1.0f, 1.0f}, {2.0f, 1.0f}, {2.0f, 0.6f}, {1.0f, 0.0f}};

TEST(Distillation, MatchesFullLogitsInDoubleAcrossChunksTemperaturesAndWeights) {
  Rng rng(80);
  const int64_t tokens = 150, width = 16, teacher_width = 24, vocab = 37;  // ~100 targets: chunks of 64 + a tail
  const Inputs in = make_inputs(rng, tokens, width, teacher_width, vocab, 0.33f);
  const Tensor targets = Tensor::from_ints(in.targets, {tokens});
  for (const DistillationSettings& settings : kSettingsGrid) {
    SCOPED_TRACE(testing::Message() << "temperature " << settings.temperature << " weight " << settings.weight);
    const float grad_scale = 1.f / 97.f;
    const Reference ref =
        reference(test::to_doubles(in.hidden), test::to_doubles(in.lm_head), test::to_doubles(in.teacher_hidden),
                  test::to_doubles(in.teacher_lm_head), in.targets, width, teacher_width, vocab, settings, grad_scale);
    ASSERT_GT(ref.tokens, 64 + 1);
    ASSERT_GT(ref.kl, 0.01 * static_cast<double>(ref.tokens));   // the teacher differs: a real KL to match
    Tensor dhidden = test::random_normal({tokens, width}, rng);  // garbage: overwritten, ignored rows -> 0
    Tensor dweight = test::random_normal({vocab, width}, rng);   // accumulated into
    std::vector<double> dweight_total = test::to_doubles(dweight);
    for (size_t i = 0; i < dweight_total.size(); ++i) dweight_total[i] += ref.dweight[i];
    const DistillationResult got = lm_head_distillation(in.hidden, in.lm_head, in.teacher_hidden, in.teacher_lm_head,
                                                        targets, settings, grad_scale, &dhidden, &dweight);
    expect_matches(got, ref, dhidden, dweight, dweight_total);

    // Loss only: the same numbers.
    const DistillationResult loss_only = lm_head_distillation(
        in.hidden, in.lm_head, in.teacher_hidden, in.teacher_lm_head, targets, settings, grad_scale, nullptr, nullptr);
    EXPECT_EQ(loss_only.loss_sum, got.loss_sum);
    EXPECT_EQ(loss_only.kl_sum, got.kl_sum);
  }
}

TEST(Distillation, GradientsMatchFiniteDifferencesOfTheFloat64Loss) {
  Rng rng(81);
  const int64_t tokens = 5, width = 4, teacher_width = 6, vocab = 7;
  const Inputs in = make_inputs(rng, tokens, width, teacher_width, vocab, 0.0f);
  std::vector<int32_t> targets = in.targets;
  targets[1] = kIgnoreIndex;
  const DistillationSettings settings{1.5f, 0.8f};
  const double grad_scale = 0.25;
  std::vector<double> hd = test::to_doubles(in.hidden), wd = test::to_doubles(in.lm_head);
  const std::vector<double> htd = test::to_doubles(in.teacher_hidden), wtd = test::to_doubles(in.teacher_lm_head);
  auto loss = [&] {
    return grad_scale * reference(hd, wd, htd, wtd, targets, width, teacher_width, vocab, settings, 0).loss;
  };
  const std::vector<double> dh_expected = test::finite_difference(hd, loss);
  const std::vector<double> dw_expected = test::finite_difference(wd, loss);
  Tensor dhidden = Tensor::empty({tokens, width}, DType::F32), dweight = Tensor::zeros({vocab, width}, DType::F32);
  lm_head_distillation(in.hidden, in.lm_head, in.teacher_hidden, in.teacher_lm_head,
                       Tensor::from_ints(targets, {tokens}), settings, static_cast<float>(grad_scale), &dhidden,
                       &dweight);
  test::expect_near_doubles(dhidden, dh_expected, test::kGradTol, "dhidden");
  test::expect_near_doubles(dweight, dw_expected, test::kGradTol, "dweight");
}

TEST(Distillation, WeightZeroIsTheFusedCrossEntropy) {
  Rng rng(82);
  const int64_t tokens = 70, width = 8, vocab = 29;
  const Inputs in = make_inputs(rng, tokens, width, width, vocab, 0.2f);
  const Tensor targets = Tensor::from_ints(in.targets, {tokens});
  Tensor dh_ce = Tensor::empty({tokens, width}, DType::F32), dw_ce = Tensor::zeros({vocab, width}, DType::F32);
  Tensor dh = Tensor::empty({tokens, width}, DType::F32), dw = Tensor::zeros({vocab, width}, DType::F32);
  const CrossEntropyResult ce = lm_head_cross_entropy(in.hidden, in.lm_head, targets, 0.1f, &dh_ce, &dw_ce);
  const DistillationResult distill = lm_head_distillation(in.hidden, in.lm_head, in.teacher_hidden, in.teacher_lm_head,
                                                          targets, DistillationSettings{2.0f, 0.0f}, 0.1f, &dh, &dw);
  // Not bit for bit: the cross-entropy's row kernel is compiled per x86-64 level (ops/cpu/x86/levels.h), whose
  // vector width orders its sums; this one at the baseline.
  EXPECT_NEAR(distill.loss_sum, ce.loss_sum, 1e-6 * ce.loss_sum);
  EXPECT_EQ(distill.ce_sum, distill.loss_sum);
  EXPECT_EQ(distill.correct, ce.correct);
  test::expect_near_doubles(dh, test::to_doubles(dh_ce), test::kForwardTol, "dhidden");
  test::expect_near_doubles(dw, test::to_doubles(dw_ce), test::kForwardTol, "dweight");
}

TEST(Distillation, AStudentEqualToItsTeacherHasNoKlAndNoGradient) {
  Rng rng(83);
  const int64_t tokens = 9, width = 8, vocab = 300;
  const Tensor hidden = test::random_normal({tokens, width}, rng), lm_head = test::random_normal({vocab, width}, rng);
  const std::vector<int32_t> target(static_cast<size_t>(tokens), 5);
  Tensor dh = Tensor::empty({tokens, width}, DType::F32), dw = Tensor::zeros({vocab, width}, DType::F32);
  const DistillationResult got =
      lm_head_distillation(hidden, lm_head, hidden, lm_head, Tensor::from_ints(target, {tokens}),
                           DistillationSettings{2.0f, 1.0f}, 1.0f, &dh, &dw);
  EXPECT_EQ(got.agree, tokens);
  EXPECT_NEAR(got.kl_sum, 0.0, 1e-6 * tokens);
  for (float value : to_float_vector(dh)) EXPECT_NEAR(value, 0.f, 1e-5f);
  for (float value : to_float_vector(dw)) EXPECT_NEAR(value, 0.f, 1e-5f);
}

TEST(Distillation, IgnoredRowsAndBadTargets) {
  Rng rng(84);
  const Inputs in = make_inputs(rng, 3, 4, 4, 5, 0.0f);
  Tensor dhidden = test::random_normal({3, 4}, rng), dweight = test::random_normal({5, 4}, rng);
  const std::vector<float> dweight_before = to_float_vector(dweight);
  const DistillationResult none =
      lm_head_distillation(in.hidden, in.lm_head, in.teacher_hidden, in.teacher_lm_head,
                           Tensor::from_ints({kIgnoreIndex, kIgnoreIndex, kIgnoreIndex}, {3}), DistillationSettings{},
                           1.f, &dhidden, &dweight);
  EXPECT_EQ(none.tokens, 0);
  EXPECT_EQ(none.loss_sum, 0.0);
  for (float value : to_float_vector(dhidden)) EXPECT_EQ(value, 0.f);
  EXPECT_EQ(to_float_vector(dweight), dweight_before);
  for (int32_t bad : {5, -1, -101}) {
    EXPECT_THROW(
        lm_head_distillation(in.hidden, in.lm_head, in.teacher_hidden, in.teacher_lm_head,
                             Tensor::from_ints({0, bad, 1}, {3}), DistillationSettings{}, 1.f, nullptr, nullptr),
        Error)
        << bad;
  }
}

// ---- against the teacher's top K ------------------------------------------------------------------------------

// The teacher's top K of each targeted row, from its logits in double (most likely first, lower id on ties).
TeacherTopK top_k_of(const std::vector<double>& ht, const std::vector<double>& wt, const std::vector<int32_t>& targets,
                     int64_t teacher_width, int64_t vocab, int64_t k, double tau) {
  std::vector<int32_t> ids;
  std::vector<float> log_probs, log_rest;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] == kIgnoreIndex) continue;
    const std::vector<double> p = softmax(logits_of(ht, wt, static_cast<int64_t>(i), teacher_width, vocab), tau);
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    for (int64_t v = 0; v < vocab; ++v) order[static_cast<size_t>(v)] = static_cast<int32_t>(v);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    double rest = 0;
    for (int64_t j = 0; j < vocab; ++j) {
      const int32_t v = order[static_cast<size_t>(j)];
      if (j < k) {
        ids.push_back(v);
        log_probs.push_back(static_cast<float>(std::log(p[static_cast<size_t>(v)])));
      } else {
        rest += p[static_cast<size_t>(v)];
      }
    }
    log_rest.push_back(k < vocab ? static_cast<float>(std::log(rest)) : -INFINITY);
  }
  const auto m = static_cast<int64_t>(log_rest.size());
  return {Tensor::from_ints(ids, {m, k}), Tensor::from_floats(log_probs, {m, k}), Tensor::from_floats(log_rest, {m})};
}

// ops/distillation.h's K + 1-outcome loss, term by term in double, from the cache's (float) values.
Reference topk_reference(const std::vector<double>& h, const std::vector<double>& w, const TeacherTopK& top,
                         const std::vector<int32_t>& targets, int64_t width, int64_t vocab,
                         const DistillationSettings& s, double grad_scale) {
  Reference ref;
  ref.dhidden.assign(h.size(), 0.0);
  ref.dweight.assign(w.size(), 0.0);
  const double tau = s.temperature;
  const int64_t k = top.k();
  const int32_t* ids = top.ids.data<int32_t>();
  const float* log_p = top.log_probs.data<float>();
  const float* log_rest = top.log_rest.data<float>();
  int64_t m = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const int32_t target = targets[i];
    if (target == kIgnoreIndex) continue;
    const auto row = static_cast<int64_t>(i);
    const std::vector<double> z = logits_of(h, w, row, width, vocab);
    const std::vector<double> q = softmax(z, tau);
    std::vector<double> teacher(static_cast<size_t>(vocab), -1.0);  // p on the K, -1 outside
    double kl = 0, q_rest = 1;
    for (int64_t j = 0; j < k; ++j) {
      const auto v = static_cast<size_t>(ids[m * k + j]);
      const double p = std::exp(static_cast<double>(log_p[m * k + j]));
      teacher[v] = p;
      kl += p * (log_p[m * k + j] - std::log(q[v]));
      q_rest -= q[v];
    }
    const double rest = std::exp(static_cast<double>(log_rest[m]));
    if (rest > 0) kl += rest * (log_rest[m] - std::log(q_rest));
    std::vector<double> pull(q.size());
    for (size_t v = 0; v < q.size(); ++v) pull[v] = teacher[v] >= 0 ? teacher[v] : rest * q[v] / q_rest;
    add_row(ref, row, target, kl, z, pull, ids[m * k], h, w, width, s, grad_scale);
    ++m;
  }
  return ref;
}

TEST(DistillationTopK, MatchesTheTopKKlInDoubleAcrossChunksTemperaturesAndWeights) {
  Rng rng(85);
  const int64_t tokens = 150, width = 16, teacher_width = 24, vocab = 37, k = 5;
  const Inputs in = make_inputs(rng, tokens, width, teacher_width, vocab, 0.33f);
  const Tensor targets = Tensor::from_ints(in.targets, {tokens});
  for (const DistillationSettings& settings : kSettingsGrid) {
    SCOPED_TRACE(testing::Message() << "temperature " << settings.temperature << " weight " << settings.weight);
    const TeacherTopK top = top_k_of(test::to_doubles(in.teacher_hidden), test::to_doubles(in.teacher_lm_head),
                                     in.targets, teacher_width, vocab, k, settings.temperature);
    const float grad_scale = 1.f / 97.f;
    const Reference ref = topk_reference(test::to_doubles(in.hidden), test::to_doubles(in.lm_head), top, in.targets,
                                         width, vocab, settings, grad_scale);
    ASSERT_GT(ref.tokens, 64 + 1);
    ASSERT_GT(ref.kl, 0.01 * static_cast<double>(ref.tokens));
    Tensor dhidden = test::random_normal({tokens, width}, rng);  // overwritten, ignored rows -> 0
    Tensor dweight = test::random_normal({vocab, width}, rng);   // accumulated into
    std::vector<double> dweight_total = test::to_doubles(dweight);
    for (size_t i = 0; i < dweight_total.size(); ++i) dweight_total[i] += ref.dweight[i];
    const DistillationResult got =
        lm_head_distillation_topk(in.hidden, in.lm_head, top, targets, settings, grad_scale, &dhidden, &dweight);
    expect_matches(got, ref, dhidden, dweight, dweight_total);
    const DistillationResult loss_only =
        lm_head_distillation_topk(in.hidden, in.lm_head, top, targets, settings, grad_scale, nullptr, nullptr);
    EXPECT_EQ(loss_only.loss_sum, got.loss_sum);
  }
}

TEST(DistillationTopK, GradientsMatchFiniteDifferencesOfTheFloat64Loss) {
  Rng rng(86);
  const int64_t tokens = 5, width = 4, teacher_width = 6, vocab = 9, k = 3;
  const Inputs in = make_inputs(rng, tokens, width, teacher_width, vocab, 0.0f);
  std::vector<int32_t> targets = in.targets;
  targets[1] = kIgnoreIndex;
  const DistillationSettings settings{1.5f, 0.8f};
  const TeacherTopK top = top_k_of(test::to_doubles(in.teacher_hidden), test::to_doubles(in.teacher_lm_head), targets,
                                   teacher_width, vocab, k, settings.temperature);
  const double grad_scale = 0.25;
  std::vector<double> hd = test::to_doubles(in.hidden), wd = test::to_doubles(in.lm_head);
  auto loss = [&] { return grad_scale * topk_reference(hd, wd, top, targets, width, vocab, settings, 0).loss; };
  const std::vector<double> dh_expected = test::finite_difference(hd, loss);
  const std::vector<double> dw_expected = test::finite_difference(wd, loss);
  Tensor dhidden = Tensor::empty({tokens, width}, DType::F32), dweight = Tensor::zeros({vocab, width}, DType::F32);
  lm_head_distillation_topk(in.hidden, in.lm_head, top, Tensor::from_ints(targets, {tokens}), settings,
                            static_cast<float>(grad_scale), &dhidden, &dweight);
  test::expect_near_doubles(dhidden, dh_expected, test::kGradTol, "dhidden");
  test::expect_near_doubles(dweight, dw_expected, test::kGradTol, "dweight");
}

// K = V leaves nothing out: the loss, counts and gradients of the distillation from the teacher's logits; and
// select_teacher_top_k gives the teacher's top K from those logits.
TEST(DistillationTopK, AllTokensIsTheFullDistillation) {
  Rng rng(87);
  const int64_t tokens = 70, width = 8, teacher_width = 12, vocab = 29;
  const Inputs in = make_inputs(rng, tokens, width, teacher_width, vocab, 0.2f);
  const Tensor targets = Tensor::from_ints(in.targets, {tokens});
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < tokens; ++i)
    if (in.targets[static_cast<size_t>(i)] != kIgnoreIndex) rows.push_back(i);
  const auto m = static_cast<int64_t>(rows.size());
  Tensor teacher_rows = Tensor::empty({m, teacher_width}, DType::F32);
  for (int64_t r = 0; r < m; ++r)
    teacher_rows.narrow(0, r, 1).copy_from(in.teacher_hidden.narrow(0, rows[static_cast<size_t>(r)], 1));
  Tensor teacher_logits = Tensor::empty({m, vocab}, DType::F32);
  gemm(teacher_rows, false, in.teacher_lm_head, true, teacher_logits);
  const DistillationSettings settings{2.0f, 0.7f};
  const TeacherTopK top = select_teacher_top_k(teacher_logits, vocab, settings.temperature);
  for (float rest : to_float_vector(top.log_rest)) EXPECT_EQ(rest, -INFINITY);
  Tensor dh_full = Tensor::empty({tokens, width}, DType::F32), dw_full = Tensor::zeros({vocab, width}, DType::F32);
  Tensor dh_top = Tensor::empty({tokens, width}, DType::F32), dw_top = Tensor::zeros({vocab, width}, DType::F32);
  const DistillationResult full = lm_head_distillation(in.hidden, in.lm_head, in.teacher_hidden, in.teacher_lm_head,
                                                       targets, settings, 0.1f, &dh_full, &dw_full);
  const DistillationResult topk =
      lm_head_distillation_topk(in.hidden, in.lm_head, top, targets, settings, 0.1f, &dh_top, &dw_top);
  EXPECT_NEAR(topk.kl_sum, full.kl_sum, 1e-5 * full.kl_sum);
  EXPECT_NEAR(topk.loss_sum, full.loss_sum, 1e-5 * full.loss_sum);
  EXPECT_EQ(topk.tokens, full.tokens);
  EXPECT_EQ(topk.correct, full.correct);
  EXPECT_EQ(topk.agree, full.agree);
  test::expect_near_doubles(dh_top, test::to_doubles(dh_full), test::kForwardTol, "dhidden");
  test::expect_near_doubles(dw_top, test::to_doubles(dw_full), test::kForwardTol, "dweight");
}

TEST(DistillationTopK, SelectionOrdersByProbabilityThenIdAndKeepsTheRest) {
  // Two rows of 5 logits; at τ = 2 the probabilities are softmax(z / 2).
  const Tensor logits = Tensor::from_floats({1, 3, 3, 0, 2, /**/ -1, -1, -1, -1, -1}, {2, 5});
  const TeacherTopK top = select_teacher_top_k(logits, 3, 2.0f);
  const int32_t* ids = top.ids.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 6), (std::vector<int32_t>{1, 2, 4, 0, 1, 2}));
  const double lse = std::log(std::exp(0.5) + 2 * std::exp(1.5) + 1 + std::exp(1.0));
  const std::vector<float> log_p = to_float_vector(top.log_probs), log_rest = to_float_vector(top.log_rest);
  EXPECT_NEAR(log_p[0], 1.5 - lse, 1e-6);
  EXPECT_NEAR(log_p[2], 1.0 - lse, 1e-6);
  EXPECT_NEAR(log_rest[0], std::log(std::exp(0.5) + 1) - lse, 1e-6);
  EXPECT_NEAR(log_p[3], std::log(0.2), 1e-6);
  EXPECT_NEAR(log_rest[1], std::log(0.4), 1e-6);
}

}  // namespace
}  // namespace nvfp4lm::test_distillation
