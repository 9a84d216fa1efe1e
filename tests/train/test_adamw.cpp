// AdamW with fp32 moments: against the update written out by hand, against PyTorch's torch.optim.AdamW
// (values recorded below), against a double-precision reference loop over many steps; weight-decay masking,
// the gradient multiplier, name-keyed state; bf16 masters with stochastic rounding.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/test_util.h"
#include "io/checksum.h"
#include "train/optim/adamw.h"
#include "train/optim/stochastic_rounding.h"

namespace nvfp4lm::test_adamw {
namespace {

Parameter make_parameter(const std::string& name, const Shape& shape, Rng& rng, bool decay, DType dtype = DType::F32) {
  Parameter p;
  p.name = name;
  Tensor value = test::random_normal(shape, rng);
  if (dtype == DType::BF16) {
    p.value = Tensor::empty(shape, DType::BF16);
    convert_cpu(value, p.value);
  } else {
    p.value = value;
  }
  p.grad = Tensor::zeros(shape, DType::F32);
  p.weight_decay = decay;
  return p;
}

void fill_normal(Tensor& t, Rng& rng, float scale) {
  float* data = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) data[i] = scale * rng.normal();
}

std::vector<float> values_of(const Parameter& p) { return to_float_vector(p.value); }

TEST(AdamW, FirstStepMatchesHandComputedFormula) {
  // After one step m_hat = g and v_hat = g^2, so p1 = p0 * (1 - lr * wd) - lr * g / (|g| + eps).
  std::vector<float> p0 = {0.5f, -1.25f, 2.0f, 0.75f, -3.0f};
  std::vector<float> g = {0.25f, -0.5f, 1e-3f, -2.0f, 0.0f};
  Parameter p{"w", Tensor::from_floats(p0, {5}), Tensor::from_floats(g, {5}), true};
  AdamWOptions options;
  options.weight_decay = 0.1;
  AdamW optimizer(std::span<const Parameter>(&p, 1), options);
  const double lr = 0.01;
  optimizer.step(std::span<Parameter>(&p, 1), lr);
  EXPECT_EQ(optimizer.step_count(), 1);
  for (size_t i = 0; i < p0.size(); ++i) {
    const double expected = p0[i] * (1 - lr * 0.1) - lr * g[i] / (std::fabs(static_cast<double>(g[i])) + 1e-8);
    EXPECT_NEAR(p.value.data<float>()[i], expected, 1e-6 * std::max(1.0, std::fabs(expected))) << "element " << i;
  }
}

// torch.optim.AdamW(lr per step, betas=(0.9, 0.95), eps=1e-8, foreach=False), PyTorch 1.13 CPU, fp32:
// p0 and three gradients below, learning rates 1e-2, 5e-3, 2e-3; weight_decay 0.1 and 0.0.
TEST(AdamW, MatchesTorchAdamW) {
  const std::vector<float> p0 = {0.5f, -1.25f, 2.0f, 0.015625f, -0.75f, 3.5f};
  const std::vector<std::vector<float>> grads = {{0.25f, -0.5f, 1.5f, -0.125f, 0.0f, 2.0f},
                                                 {-0.375f, 0.75f, 1.25f, 0.0625f, 0.5f, -1.0f},
                                                 {0.125f, -0.25f, -2.0f, 0.5f, 0.25f, 0.75f}};
  const double lrs[3] = {1e-2, 5e-3, 2e-3};
  const std::vector<float> torch_decayed = {0.4904172122478485f,   -1.239142894744873f,  1.9814878702163696f,
                                            0.025837132707238197f, -0.7539926767349243f, 3.4819085597991943f};
  const std::vector<float> torch_not_decayed = {0.4912600517272949f,   -1.2412601709365845f, 1.9848783016204834f,
                                                0.025870950892567635f, -0.7552677989006042f, 3.4878485202789307f};
  const std::vector<float> torch_exp_avg = {-0.0010000010952353477f, 0.0020000021904706955f, 0.034000009298324585f,
                                            0.045500002801418304f,   0.07000000029802322f,   0.14699998497962952f};
  const std::vector<float> torch_exp_avg_sq = {0.01028124988079071f,  0.04112499952316284f,  0.37575000524520874f,
                                               0.013390624895691872f, 0.014999999664723873f, 0.25612497329711914f};
  // The masked parameter is the one torch ran with weight_decay = 0.
  std::vector<Parameter> params = {
      {"decayed", Tensor::from_floats(p0, {2, 3}), Tensor::zeros({2, 3}, DType::F32), true},
      {"norm", Tensor::from_floats(p0, {6}), Tensor::zeros({6}, DType::F32), false}};
  AdamW optimizer(params);  // defaults: betas (0.9, 0.95), eps 1e-8, weight decay 0.1
  for (int s = 0; s < 3; ++s) {
    for (Parameter& p : params) std::copy(grads[s].begin(), grads[s].end(), p.grad.data<float>());
    optimizer.step(params, lrs[s]);
  }
  // Operation order follows torch, but torch's vectorized CPU kernels fuse a + alpha * b into one FMA and
  // we do not (adamw_math.h): last-bit differences, visible most where the moment update cancels.
  const test::Tolerance ulps{1e-7f, 2.5e-7f};
  test::expect_close(values_of(params[0]), torch_decayed, ulps, "decayed parameter vs torch");
  test::expect_close(values_of(params[1]), torch_not_decayed, ulps, "undecayed parameter vs torch");
  const std::vector<NamedTensor> state = optimizer.state_tensors();
  ASSERT_EQ(state.size(), 4u);
  EXPECT_EQ(state[0].name, "decayed.exp_avg");
  EXPECT_EQ(state[1].name, "decayed.exp_avg_sq");
  test::expect_close(to_float_vector(state[0].tensor), torch_exp_avg, ulps, "exp_avg vs torch");
  test::expect_close(to_float_vector(state[1].tensor), torch_exp_avg_sq, ulps, "exp_avg_sq vs torch");
}

TEST(AdamW, ManyStepsMatchDoublePrecisionReference) {
  Rng rng(11);
  std::vector<Parameter> params = {make_parameter("a", {37, 19}, rng, true), make_parameter("b", {1000}, rng, false),
                                   make_parameter("c", {5}, rng, true)};
  AdamWOptions options;
  options.beta1 = 0.8;
  options.beta2 = 0.99;
  options.eps = 1e-6;
  options.weight_decay = 0.05;
  AdamW optimizer(params, options);

  struct Reference {
    std::vector<double> p, m, v;
  };
  std::vector<Reference> ref;
  for (const Parameter& p : params) {
    std::vector<float> v0 = values_of(p);
    ref.push_back({std::vector<double>(v0.begin(), v0.end()), std::vector<double>(v0.size(), 0.0),
                   std::vector<double>(v0.size(), 0.0)});
  }
  for (int t = 1; t <= 40; ++t) {
    const double lr = 1e-3 * (1.0 + 0.5 * std::sin(t));
    const float multiplier = 0.5f + 0.01f * static_cast<float>(t);
    for (Parameter& p : params) fill_normal(p.grad, rng, 0.1f);
    for (size_t k = 0; k < params.size(); ++k) {
      const float* g = params[k].grad.data<float>();
      const double wd = params[k].weight_decay ? options.weight_decay : 0.0;
      for (size_t i = 0; i < ref[k].p.size(); ++i) {
        const double grad = static_cast<double>(g[i]) * multiplier;
        double& p = ref[k].p[i];
        double& m = ref[k].m[i];
        double& v = ref[k].v[i];
        p *= 1 - lr * wd;
        m = options.beta1 * m + (1 - options.beta1) * grad;
        v = options.beta2 * v + (1 - options.beta2) * grad * grad;
        const double m_hat = m / (1 - std::pow(options.beta1, t));
        const double v_hat = v / (1 - std::pow(options.beta2, t));
        p -= lr * m_hat / (std::sqrt(v_hat) + options.eps);
      }
    }
    optimizer.step(params, lr, multiplier);
  }
  for (size_t k = 0; k < params.size(); ++k) {
    std::vector<float> expected(ref[k].p.begin(), ref[k].p.end());
    test::expect_close(values_of(params[k]), expected, {2e-6f, 2e-5f}, "parameter " + params[k].name);
  }
}

TEST(AdamW, WeightDecayOnlyWhereFlagged) {
  // Zero gradients leave the moments at zero, so the only change is the decoupled decay.
  Rng rng(3);
  std::vector<Parameter> params = {make_parameter("linear.weight", {8, 8}, rng, true),
                                   make_parameter("norm.weight", {8}, rng, false)};
  const std::vector<float> linear0 = values_of(params[0]);
  const std::vector<float> norm0 = values_of(params[1]);
  AdamWOptions options;
  options.weight_decay = 0.5;
  AdamW optimizer(params, options);
  optimizer.step(params, 0.1);
  const float decay = static_cast<float>(1.0 - 0.1 * 0.5);
  for (size_t i = 0; i < linear0.size(); ++i) EXPECT_EQ(params[0].value.data<float>()[i], linear0[i] * decay);
  EXPECT_EQ(values_of(params[1]), norm0);
}

TEST(AdamW, GradientMultiplierEqualsScaledGradients) {
  Rng rng(5);
  std::vector<Parameter> a = {make_parameter("w", {300}, rng, true)};
  std::vector<Parameter> b = {{"w", a[0].value.clone(), Tensor::zeros({300}, DType::F32), true}};
  AdamW opt_a(a), opt_b(b);
  for (int t = 0; t < 5; ++t) {
    fill_normal(a[0].grad, rng, 1.0f);
    const float multiplier = 0.37f;
    for (int64_t i = 0; i < 300; ++i) b[0].grad.data<float>()[i] = a[0].grad.data<float>()[i] * multiplier;
    opt_a.step(a, 1e-2, multiplier);
    opt_b.step(b, 1e-2);
  }
  EXPECT_EQ(values_of(a[0]), values_of(b[0]));
}

TEST(AdamW, StateIsKeyedByNameNotOrder) {
  Rng rng(9);
  std::vector<Parameter> forward = {make_parameter("x", {40}, rng, true), make_parameter("y", {7, 3}, rng, false)};
  std::vector<Parameter> reversed = {{"y", forward[1].value.clone(), Tensor::zeros({7, 3}, DType::F32), false},
                                     {"x", forward[0].value.clone(), Tensor::zeros({40}, DType::F32), true}};
  AdamW opt_forward(forward), opt_reversed(forward);  // both built from the same order
  for (int t = 0; t < 4; ++t) {
    fill_normal(forward[0].grad, rng, 1.0f);
    fill_normal(forward[1].grad, rng, 1.0f);
    reversed[1].grad.copy_from(forward[0].grad);
    reversed[0].grad.copy_from(forward[1].grad);
    opt_forward.step(forward, 1e-2);
    opt_reversed.step(reversed, 1e-2);  // given in the other order
  }
  EXPECT_EQ(values_of(forward[0]), values_of(reversed[1]));
  EXPECT_EQ(values_of(forward[1]), values_of(reversed[0]));
}

TEST(AdamW, RejectsBadOptionsAndKinds) {
  std::vector<Parameter> params = {{"w", Tensor::zeros({4}, DType::F32), Tensor::zeros({4}, DType::F32), true}};
  AdamWOptions bad;
  bad.beta2 = 1.0;
  EXPECT_THROW(AdamW(params, bad), Error);
  EXPECT_THROW(make_optimizer("sgd", params, {}), Error);
  EXPECT_EQ(make_optimizer("adamw", params, {})->kind(), "adamw");
  AdamW optimizer(params);
  EXPECT_THROW(optimizer.step(params, std::nan("")), Error);
}

// ---- bf16 masters with stochastic rounding --------------------------------------------------------------------

TEST(StochasticRounding, ExactValuesAndSpecialsAreKept) {
  for (float x : {1.0f, -2.5f, 0.0f, 3.0e38f, 1.0e-40f}) {
    const uint16_t rne = float_to_bf16(x);
    if (bf16_to_float(rne) != x) continue;  // only exactly representable inputs
    for (float u : {0.0f, 0.5f, 0.99999994f}) EXPECT_EQ(float_to_bf16_stochastic(x, u), rne) << x;
  }
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16_stochastic(std::nanf(""), 0.9f))));
  EXPECT_EQ(bf16_to_float(float_to_bf16_stochastic(INFINITY, 0.9f)), INFINITY);
  EXPECT_EQ(bf16_to_float(float_to_bf16_stochastic(-INFINITY, 0.9f)), -INFINITY);
}

TEST(StochasticRounding, IsUnbiased) {
  // x lies a fraction f of the way from one bf16 value to the next; it must round up with probability f.
  const uint64_t seed = 1234;
  const int draws = 200000;
  for (float f : {0.1f, 0.3f, 0.5f, 0.9f}) {
    for (float sign : {1.0f, -1.0f}) {
      const float lower = sign * 1.5f;
      const float step = sign * 0.0078125f;  // bf16 ulp in [1, 2)
      const float x = lower + f * step;
      double sum = 0;
      int up = 0;
      for (int i = 0; i < draws; ++i) {
        const float r = bf16_to_float(float_to_bf16_stochastic(x, counter_uniform(seed, static_cast<uint64_t>(i))));
        ASSERT_TRUE(r == lower || r == lower + step) << r;
        up += r != lower;
        sum += r;
      }
      const double p = static_cast<double>(up) / draws;
      const double sigma = std::sqrt(f * (1 - f) / draws);
      EXPECT_NEAR(p, f, 5 * sigma) << "x = " << x;
      EXPECT_NEAR(sum / draws, x, 5 * sigma * std::fabs(step)) << "x = " << x;
    }
  }
}

TEST(StochasticRounding, Bf16MasterIsDeterministicAndFollowsTheSeedContract) {
  // Same seed: same bits for any number of threads; each element is the documented function of
  // (seed, step, hash(name), element index), which a CUDA twin must reproduce.
  Rng rng(21);
  std::vector<Parameter> base = {make_parameter("w", {100000}, rng, true, DType::BF16)};
  fill_normal(base[0].grad, rng, 1.0f);
  auto run = [&](uint64_t seed, int threads) {
    std::vector<Parameter> p = {{"w", base[0].value.clone(), base[0].grad.clone(), true}};
    AdamWOptions options;
    options.seed = seed;
    AdamW optimizer(p, options);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    optimizer.step(p, 1e-3);
    omp_set_num_threads(saved);
    return p[0].value;
  };
  const Tensor one_thread = run(7, 1);
  const Tensor two_threads = run(7, 2);
  const Tensor other_seed = run(8, 2);
  const uint16_t* a = one_thread.data<uint16_t>();
  const uint16_t* b = two_threads.data<uint16_t>();
  const uint16_t* c = other_seed.data<uint16_t>();
  EXPECT_TRUE(std::equal(a, a + 100000, b));
  EXPECT_FALSE(std::equal(a, a + 100000, c));

  // The contract, element by element: the fp32 update of the bf16 value, stochastically rounded.
  const uint64_t seed = master_rounding_seed(7, 1, xxh64("w", 1));
  const AdamWScalars s = adamw_scalars(1e-3, 0.9, 0.95, 1e-8, 0.1, 1, 1.0f);
  for (int64_t i = 0; i < 100000; i += 997) {
    float m = 0, v = 0;
    const float updated =
        adamw_update(bf16_to_float(base[0].value.data<uint16_t>()[i]), base[0].grad.data<float>()[i], m, v, s);
    EXPECT_EQ(a[i], float_to_bf16_stochastic(updated, counter_uniform(seed, static_cast<uint64_t>(i)))) << i;
  }
}

TEST(StochasticRounding, Bf16MasterTracksFp32MasterWhereNearestRoundingStalls) {
  // Each update (~lr = 1e-4) is far below half a bf16 ulp at |w| ~ 1 (2^-9 ~ 2e-3): round-to-nearest would
  // never move the weights; stochastic rounding must follow the fp32 master on average.
  Rng rng(4);
  const int64_t n = 8192;
  Parameter fp32{"w", Tensor::empty({n}, DType::F32), Tensor::zeros({n}, DType::F32), false};
  for (int64_t i = 0; i < n; ++i) fp32.value.data<float>()[i] = 1.0f + 0.25f * rng.uniform();
  Parameter bf16{"w", Tensor::empty({n}, DType::BF16), Tensor::zeros({n}, DType::F32), false};
  convert_cpu(fp32.value, bf16.value);
  convert_cpu(bf16.value, fp32.value);  // same start
  const std::vector<float> start = to_float_vector(fp32.value);
  AdamW opt_fp32(std::span<const Parameter>(&fp32, 1)), opt_bf16(std::span<const Parameter>(&bf16, 1));
  for (int t = 0; t < 100; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      const float g = 1.0f + rng.uniform();  // always positive: the weights drift down by ~lr a step
      fp32.grad.data<float>()[i] = g;
      bf16.grad.data<float>()[i] = g;
    }
    opt_fp32.step(std::span<Parameter>(&fp32, 1), 1e-4);
    opt_bf16.step(std::span<Parameter>(&bf16, 1), 1e-4);
  }
  const std::vector<float> a = to_float_vector(fp32.value);
  const std::vector<float> b = to_float_vector(bf16.value);
  double drift_fp32 = 0, drift_bf16 = 0;
  for (int64_t i = 0; i < n; ++i) {
    drift_fp32 += start[i] - a[i];
    drift_bf16 += start[i] - b[i];
  }
  drift_fp32 /= n;
  drift_bf16 /= n;
  EXPECT_NEAR(drift_fp32, 0.01, 1e-3);  // 100 steps of ~lr each
  // Per element the SR noise is ~sqrt(steps) * ulp / 2 ~ 0.04; averaged over n elements ~5e-4.
  EXPECT_NEAR(drift_bf16, drift_fp32, 2e-3);
}

}  // namespace
}  // namespace nvfp4lm::test_adamw
