// LoRA adapters (model/lora.h) on the CPU:
//  - the adapter's forward and backward against its formulas written out in double;
//  - the model's adapter gradients against the chain rule through the merged model: a LoRA model computes the
//    function of the full model with W + s·B·A in place of W, so its loss equals that model's, dB = s · dW · Aᵀ and
//    dA = s · Bᵀ · dW where dW is the merged model's weight gradient (both on the fixture, QAT off);
//  - the same gradients against central finite differences of the loss, on a base quantized to NVFP4 once (QAT);
//  - an NVFP4 base is used exactly as stored (a new adapter leaves the function of the NVFP4 file unchanged) and
//    training never writes it (the file's bytes, and the base's function once the adapters are zeroed again);
//  - parameters are the adapters, by PEFT name; --lora-targets and train_last_layers choose them; recompute per block
//    gives the same gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/rng.h"
#include "io/checksum.h"
#include "model/lora.h"
#include "model_test_util.h"

namespace nvfp4lm::test::test_lora {
namespace {

Tensor random_matrix(int64_t rows, int64_t cols, uint64_t seed, float scale) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * (2.0f * counter_uniform(seed, i) - 1.0f);
  return Tensor::from_floats(v, Shape{rows, cols});
}

double at(const Tensor& t, int64_t r, int64_t c) { return t.data<float>()[r * t.dim(1) + c]; }

TEST(LoraOps, ForwardAndBackwardFollowTheirFormulasInDouble) {
  const int64_t n = 5, in = 24, out = 12, rank = 3;
  LoraOptions options;
  options.rank = static_cast<int>(rank);
  options.alpha = 6;  // s = 2
  LoraAdapter adapter =
      make_lora_adapter("model.layers.0.mlp.up_proj.weight", out, in, options, DType::F32, Device::cpu());
  ASSERT_EQ(adapter.scale, 2.0f);
  // A as PEFT initialises it: within ±1/√in, not all zero; B zero.
  const std::vector<float> a0 = to_float_vector(adapter.a);
  EXPECT_LE(*std::max_element(a0.begin(), a0.end()), 1.0 / std::sqrt(24.0));
  EXPECT_GE(*std::min_element(a0.begin(), a0.end()), -1.0 / std::sqrt(24.0));
  EXPECT_GT(std::inner_product(a0.begin(), a0.end(), a0.begin(), 0.0), 0.0);
  const std::vector<float> b0 = to_float_vector(adapter.b);
  EXPECT_TRUE(std::all_of(b0.begin(), b0.end(), [](float v) { return v == 0; }));

  adapter.b.copy_from(random_matrix(out, rank, 3, 0.5f));
  refresh_lora_adapter(adapter);
  const Tensor x = random_matrix(n, in, 4, 1.0f), dy = random_matrix(n, out, 5, 1.0f);
  const Tensor y0 = random_matrix(n, out, 6, 1.0f), dx0 = random_matrix(n, in, 7, 1.0f);
  const Tensor ga0 = random_matrix(rank, in, 8, 0.1f), gb0 = random_matrix(out, rank, 9, 0.1f);
  Tensor y = y0.clone(), dx = dx0.clone();
  adapter.grad_a.copy_from(ga0);
  adapter.grad_b.copy_from(gb0);
  lora_forward(adapter, x, y);
  lora_backward(adapter, x, dy, dx);

  const double s = 2;
  const Tensor& a = adapter.a;
  const Tensor& b = adapter.b;
  auto xa = [&](int64_t i, int64_t k) {
    double sum = 0;
    for (int64_t j = 0; j < in; ++j) sum += at(x, i, j) * at(a, k, j);
    return sum;
  };
  auto t = [&](int64_t i, int64_t k) {  // dy · B
    double sum = 0;
    for (int64_t o = 0; o < out; ++o) sum += at(dy, i, o) * at(b, o, k);
    return sum;
  };
  double worst = 0;
  auto check = [&](double actual, double expected, const char* what) {
    worst = std::max(worst, std::fabs(actual - expected) / (1.0 + std::fabs(expected)));
    EXPECT_NEAR(actual, expected, 1e-5 * (1.0 + std::fabs(expected))) << what;
  };
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < out; ++o) {
      double expected = at(y0, i, o);
      for (int64_t k = 0; k < rank; ++k) expected += s * xa(i, k) * at(b, o, k);
      check(at(y, i, o), expected, "y");
    }
    for (int64_t j = 0; j < in; ++j) {
      double expected = at(dx0, i, j);
      for (int64_t k = 0; k < rank; ++k) expected += s * t(i, k) * at(a, k, j);
      check(at(dx, i, j), expected, "dx");
    }
  }
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < rank; ++k) {
      double expected = at(gb0, o, k);
      for (int64_t i = 0; i < n; ++i) expected += s * at(dy, i, o) * xa(i, k);
      check(at(adapter.grad_b, o, k), expected, "dB");
    }
  }
  for (int64_t k = 0; k < rank; ++k) {
    for (int64_t j = 0; j < in; ++j) {
      double expected = at(ga0, k, j);
      for (int64_t i = 0; i < n; ++i) expected += s * t(i, k) * at(x, i, j);
      check(at(adapter.grad_a, k, j), expected, "dA");
    }
  }
  EXPECT_LT(worst, 1e-5);
}

TEST(LoraOps, TargetsParseEitherSpellingAndRefuseUnknownOnes) {
  EXPECT_EQ(lora_targets_text(parse_lora_targets("all")), "q,k,v,o,gate,up,down");
  EXPECT_EQ(lora_targets_text(parse_lora_targets("v_proj, q,down")), "q,v,down");
  EXPECT_THROW(parse_lora_targets("q,qkv"), Error);
  EXPECT_THROW(parse_lora_targets(","), Error);
  EXPECT_EQ(lora_a_name("model.layers.3.self_attn.q_proj.weight"),
            "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(lora_b_name("model.layers.3.mlp.down_proj.weight"),
            "base_model.model.model.layers.3.mlp.down_proj.lora_B.weight");
}

TrainModelOptions lora_options(QatMode qat, int rank = 4, double alpha = 8) {
  TrainModelOptions options;
  options.qat = qat;
  options.lora.rank = rank;
  options.lora.alpha = alpha;
  options.lora.seed = 17;
  return options;
}

// Gives every B seeded random values (a new adapter's B is zero, which would leave A without gradient).
void randomize_b(Qwen3Trainable& model, float scale) {
  uint64_t seed = 100;
  for (Parameter& p : model.parameters()) {
    if (p.name.find("lora_B") == std::string::npos) continue;
    p.value.copy_from(random_matrix(p.value.dim(0), p.value.dim(1), ++seed, scale));
  }
  model.refresh_quantized();
}

const Parameter& find_parameter(std::span<const Parameter> parameters, const std::string& name) {
  for (const Parameter& p : parameters)
    if (p.name == name) return p;
  ADD_FAILURE() << "no parameter " << name;
  return parameters.front();
}

TEST(Qwen3Lora, ParametersAreTheAdaptersByPeftName) {
  Qwen3Trainable all = Qwen3Trainable::from_files(*open_tiny(false), lora_options(QatMode::W4A16));
  EXPECT_EQ(all.parameters().size(), 2u * 7u * 2u);  // 2 layers, 7 linears, A and B
  EXPECT_EQ(all.master_weights().size(), all.parameters().size());
  EXPECT_EQ(all.parameters()[0].name, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(all.parameters()[0].value.shape(), (Shape{4, 64}));
  EXPECT_EQ(all.parameters()[1].value.shape(), (Shape{64, 4}));
  for (const Parameter& p : all.parameters()) EXPECT_TRUE(p.weight_decay) << p.name;
  EXPECT_NE(all.describe().find("LoRA rank 4 (alpha 8, scale 2) on q,k,v,o,gate,up,down in 2 of 2 layers"),
            std::string::npos)
      << all.describe();

  TrainModelOptions some = lora_options(QatMode::W4A16);
  some.lora.targets = parse_lora_targets("q,v");
  some.train_last_layers = 1;
  Qwen3Trainable last = Qwen3Trainable::from_files(*open_tiny(false), some);
  std::vector<std::string> names;
  for (const Parameter& p : last.parameters()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight",
                                             "base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight",
                                             "base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight",
                                             "base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"}));
  // Its inference model (GRPO's rollouts) carries the adapters as a run-time set of one, over the layers they are in.
  const Qwen3Model policy = last.inference_model();
  ASSERT_NE(policy.lora_adapters(), nullptr);
  EXPECT_EQ(policy.lora_adapters()->count(), 1);
  EXPECT_NE(policy.lora_adapters()->describe().find("rank 4, alpha 8, scale 2, q,v in 1 of 2 layers"),
            std::string::npos)
      << policy.lora_adapters()->describe();
}

// dW of the merged model -> the adapters' gradients by the chain rule, in double; compared per tensor.
void expect_chain_rule(const Qwen3Trainable& lora, const Qwen3Trainable& merged, float scale) {
  for (const Parameter& p : lora.parameters()) {
    if (p.name.find("lora_A") == std::string::npos) continue;
    const std::string module =
        p.name.substr(std::string("base_model.model.").size(),
                      p.name.size() - std::string("base_model.model.").size() - std::string(".lora_A.weight").size());
    const Parameter& b = find_parameter(lora.parameters(), lora_b_name(module + ".weight"));
    const Parameter& w = find_parameter(merged.parameters(), module + ".weight");
    const int64_t rank = p.value.dim(0), in = p.value.dim(1), out = b.value.dim(0);
    std::vector<float> expected_a(static_cast<size_t>(rank * in)), expected_b(static_cast<size_t>(out * rank));
    for (int64_t k = 0; k < rank; ++k)
      for (int64_t j = 0; j < in; ++j) {
        double sum = 0;
        for (int64_t o = 0; o < out; ++o) sum += at(b.value, o, k) * at(w.grad, o, j);
        expected_a[static_cast<size_t>(k * in + j)] = static_cast<float>(scale * sum);
      }
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < rank; ++k) {
        double sum = 0;
        for (int64_t j = 0; j < in; ++j) sum += at(w.grad, o, j) * at(p.value, k, j);
        expected_b[static_cast<size_t>(o * rank + k)] = static_cast<float>(scale * sum);
      }
    expect_rel_close(p.grad, Tensor::from_floats(expected_a, p.value.shape()), 1e-4, p.name);
    expect_rel_close(b.grad, Tensor::from_floats(expected_b, b.value.shape()), 1e-4, b.name);
  }
}

TEST(Qwen3Lora, GradientsAreTheChainRuleThroughTheMergedModel) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const Reference ref(tied);
    Qwen3Trainable lora = Qwen3Trainable::from_files(*open_tiny(tied), lora_options(QatMode::Off));
    randomize_b(lora, 0.2f);
    TrainModelOptions full_options;
    full_options.qat = QatMode::Off;
    Qwen3Trainable merged = Qwen3Trainable::from_files(*open_tiny(tied), full_options);
    // W + s·B·A, in double.
    for (const Parameter& w : merged.parameters()) {
      if (w.value.rank() != 2 || w.name.find("model.layers.") != 0) continue;
      const Parameter& a = find_parameter(lora.parameters(), lora_a_name(w.name));
      const Parameter& b = find_parameter(lora.parameters(), lora_b_name(w.name));
      float* v = w.value.data<float>();
      for (int64_t o = 0; o < w.value.dim(0); ++o)
        for (int64_t j = 0; j < w.value.dim(1); ++j) {
          double sum = 0;
          for (int64_t k = 0; k < a.value.dim(0); ++k) sum += at(b.value, o, k) * at(a.value, k, j);
          v[o * w.value.dim(1) + j] = static_cast<float>(v[o * w.value.dim(1) + j] + 2.0 * sum);
        }
    }
    merged.refresh_quantized();
    // The LoRA model's inference model (GRPO's rollouts): rows with its adapter compute the merged model's function,
    // rows without one the base's, bit for bit.
    {
      const Tensor ids = ref.batch(false).ids;
      auto floats = [](const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); };
      const Qwen3Model policy = lora.inference_model();
      const std::vector<float> adapted = floats(policy.forward(ids, nullptr, nullptr, 0));
      const std::vector<float> expected = floats(merged.inference_model().forward(ids));
      ASSERT_EQ(adapted.size(), expected.size());
      double largest = 0, worst = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        largest = std::max(largest, std::fabs(static_cast<double>(expected[i])));
        worst = std::max(worst, std::fabs(static_cast<double>(adapted[i]) - expected[i]));
      }
      EXPECT_LT(worst, 1e-5 * largest) << "largest logit " << largest;
      Qwen3Trainable base = Qwen3Trainable::from_files(*open_tiny(tied), full_options);
      EXPECT_EQ(floats(policy.forward(ids)), floats(base.inference_model().forward(ids)));
      EXPECT_NE(floats(policy.forward(ids)), adapted);
    }
    for (const bool packed : {false, true}) {
      const TrainBatch batch = ref.batch(packed);
      lora.zero_grad();
      merged.zero_grad();
      const LossStats lora_stats = lora.forward_backward(batch, 1.0f);
      const LossStats merged_stats = merged.forward_backward(batch, 1.0f);
      EXPECT_NEAR(lora_stats.loss_sum, merged_stats.loss_sum, 1e-5 * std::fabs(merged_stats.loss_sum));
      EXPECT_EQ(lora_stats.tokens, merged_stats.tokens);
      expect_chain_rule(lora, merged, 2.0f);
    }
  }
}

TEST(Qwen3Lora, GradientsFollowFiniteDifferencesOverAQuantizedBase) {
  const Reference ref(false);
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), lora_options(QatMode::W4A16));
  randomize_b(model, 0.2f);
  const TrainBatch batch = ref.batch(false);
  model.forward_backward(batch, 1.0f);
  Rng rng(23);
  double diff_sq = 0, ref_sq = 0;
  int probes = 0;
  for (Parameter& p : model.parameters()) {
    const float* grad = p.grad.data<float>();
    const auto largest =
        std::max_element(grad, grad + p.grad.numel(), [](float a, float b) { return std::fabs(a) < std::fabs(b); });
    for (const int64_t index : {static_cast<int64_t>(largest - grad),
                                static_cast<int64_t>(rng.below(static_cast<uint64_t>(p.grad.numel())))}) {
      float* value = p.value.data<float>();
      const float saved = value[index];
      const double h = 2e-3;
      value[index] = saved + static_cast<float>(h);
      model.refresh_quantized();
      const double up = model.evaluate(batch).loss_sum;
      value[index] = saved - static_cast<float>(h);
      model.refresh_quantized();
      const double down = model.evaluate(batch).loss_sum;
      value[index] = saved;
      model.refresh_quantized();
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(numeric, grad[index], 2e-3 + 2e-2 * std::fabs(grad[index])) << p.name << "[" << index << "]";
      diff_sq += (numeric - grad[index]) * (numeric - grad[index]);
      ref_sq += static_cast<double>(grad[index]) * grad[index];
      ++probes;
    }
  }
  EXPECT_EQ(probes, 56);
  EXPECT_LT(std::sqrt(diff_sq / ref_sq), 5e-3);
}

TEST(Qwen3Lora, AnNvfp4BaseIsUsedAsStoredAndNeverWritten) {
  TempDir dir;
  const fs::path nvfp4 = quantize_tiny_modelopt(dir, false);
  const std::string before = read_file(nvfp4 / "model.safetensors");
  const Reference ref(false);
  const TrainBatch batch = ref.batch(false);
  // The NVFP4 file's own function: its weights dequantized, QAT off.
  TrainModelOptions plain;
  plain.qat = QatMode::Off;
  plain.train_last_layers = 0;
  Qwen3Trainable stored = Qwen3Trainable::from_files(*open_model(nvfp4), plain);
  const double stored_loss = stored.evaluate(batch).loss_sum;

  Qwen3Trainable lora = Qwen3Trainable::from_files(*open_model(nvfp4), lora_options(QatMode::W4A16));
  EXPECT_EQ(lora.evaluate(batch).loss_sum, stored_loss) << "a new adapter (B = 0) changes the base's function";
  // A few plain gradient steps move the adapters and the loss...
  for (int step = 0; step < 3; ++step) {
    lora.zero_grad();
    lora.forward_backward(batch, 1.0f / 64);
    for (Parameter& p : lora.parameters()) {
      float* v = p.value.data<float>();
      const float* g = p.grad.data<float>();
      for (int64_t i = 0; i < p.value.numel(); ++i) v[i] -= 0.5f * g[i];
    }
    lora.refresh_quantized();
  }
  EXPECT_LT(lora.evaluate(batch).loss_sum, stored_loss - 1.0);
  // ...but never the base: zeroing B gives the stored model's function back, and the file is unchanged.
  for (Parameter& p : lora.parameters())
    if (p.name.find("lora_B") != std::string::npos) p.value.zero();
  lora.refresh_quantized();
  EXPECT_EQ(lora.evaluate(batch).loss_sum, stored_loss);
  EXPECT_TRUE(read_file(nvfp4 / "model.safetensors") == before) << "the base model file changed";
}

TEST(Qwen3Lora, RecomputePerBlockAndFusedGroupsGiveTheSameGradients) {
  const Reference ref(false);
  const TrainBatch batch = ref.batch(true);
  Qwen3Trainable plain = Qwen3Trainable::from_files(*open_tiny(false), lora_options(QatMode::W4A16));
  TrainModelOptions recompute_options = lora_options(QatMode::W4A16);
  recompute_options.recompute = Recompute::Block;
  Qwen3Trainable recompute = Qwen3Trainable::from_files(*open_tiny(false), recompute_options);
  randomize_b(plain, 0.2f);
  randomize_b(recompute, 0.2f);
  const LossStats a = plain.forward_backward(batch, 1.0f);
  const LossStats b = recompute.forward_backward(batch, 1.0f);
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  std::vector<NamedTensor> grads_a, grads_b;
  for (const Parameter& p : plain.parameters()) grads_a.push_back({p.name, p.grad});
  for (const Parameter& p : recompute.parameters()) grads_b.push_back({p.name, p.grad});
  for (size_t i = 0; i < grads_a.size(); ++i) {
    const std::vector<float> ga = to_float_vector(grads_a[i].tensor), gb = to_float_vector(grads_b[i].tensor);
    EXPECT_TRUE(ga == gb) << grads_a[i].name;
  }
}

// --lora-dropout: training passes drop the adapters' inputs (the loss differs from evaluation's, which drops nothing
// and equals a dropout-free model's), the mask is a function of the batch's seed (the backward and a recomputed
// forward regenerate it: gradients follow finite differences of the training loss at that seed, and recompute per
// block gives the same gradients).
TEST(Qwen3Lora, DropoutActsInTrainingOnlyAndItsGradientsFollowFiniteDifferences) {
  const Reference ref(false);
  TrainBatch batch = ref.batch(true);
  batch.dropout_seed = 9;
  TrainModelOptions with_dropout = lora_options(QatMode::W4A16);
  with_dropout.lora.dropout = 0.3;
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), with_dropout);
  Qwen3Trainable plain = Qwen3Trainable::from_files(*open_tiny(false), lora_options(QatMode::W4A16));
  randomize_b(model, 0.2f);
  randomize_b(plain, 0.2f);
  const double trained = model.forward_backward(batch, 1.0f).loss_sum;
  EXPECT_EQ(model.evaluate(batch).loss_sum, plain.evaluate(batch).loss_sum);
  EXPECT_NE(trained, model.evaluate(batch).loss_sum);
  EXPECT_NE(trained, plain.forward_backward(batch, 1.0f).loss_sum);

  TrainModelOptions recompute_options = with_dropout;
  recompute_options.recompute = Recompute::Block;
  Qwen3Trainable recompute = Qwen3Trainable::from_files(*open_tiny(false), recompute_options);
  randomize_b(recompute, 0.2f);
  EXPECT_EQ(recompute.forward_backward(batch, 1.0f).loss_sum, trained);
  for (size_t i = 0; i < model.parameters().size(); ++i)
    EXPECT_TRUE(to_float_vector(model.parameters()[i].grad) == to_float_vector(recompute.parameters()[i].grad))
        << model.parameters()[i].name;

  std::vector<std::vector<float>> analytic;
  for (const Parameter& p : model.parameters()) analytic.push_back(to_float_vector(p.grad));
  double diff_sq = 0, ref_sq = 0;
  for (size_t n = 0; n < model.parameters().size(); ++n) {
    Parameter& p = model.parameters()[n];
    const std::vector<float>& grad = analytic[n];
    const int64_t index =
        std::max_element(grad.begin(), grad.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }) -
        grad.begin();
    float* value = p.value.data<float>();
    const float saved = value[index];
    const double h = 2e-3;
    value[index] = saved + static_cast<float>(h);
    model.refresh_quantized();
    const double up = model.forward_backward(batch, 0.0f).loss_sum;  // the training loss at the batch's mask
    value[index] = saved - static_cast<float>(h);
    model.refresh_quantized();
    const double down = model.forward_backward(batch, 0.0f).loss_sum;
    value[index] = saved;
    model.refresh_quantized();
    const double numeric = (up - down) / (2 * h), expected = grad[static_cast<size_t>(index)];
    EXPECT_NEAR(numeric, expected, 2e-3 + 2e-2 * std::fabs(expected)) << p.name << "[" << index << "]";
    diff_sq += (numeric - expected) * (numeric - expected);
    ref_sq += expected * expected;
  }
  EXPECT_LT(std::sqrt(diff_sq / ref_sq), 5e-3);
}

}  // namespace
}  // namespace nvfp4lm::test::test_lora
