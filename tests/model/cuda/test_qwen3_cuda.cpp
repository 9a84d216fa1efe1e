// Qwen3 on the GPU against the CPU and the PyTorch fixtures, at bf16 tolerance (activations bf16, fp32
// accumulation; DESIGN.md §3): full-forward logits (untied, tied, packed rows, NVFP4 ModelOpt), KV-cache decoding
// against the GPU's own full forward, greedy continuations GPU vs CPU, and the training forward/backward (loss and
// every gradient, QAT w4a16) with the low-memory modes, LoRA adapters in training and at run time. Every comparison
// prints its measured error, so a GPU run shows how much room each bound leaves.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "common/emulated_arch.h"
#include "common/lora_test_util.h"
#include "core/rng.h"
#include "model/model_test_util.h"
#include "model/qwen3_decode_step.h"
#include "model/qwen3_model.h"
#include "ops/cross_entropy.h"
#include "ops/distillation.h"
#include "ops/nvfp4_w4a4_linear.h"

namespace nvfp4lm::test::test_qwen3_cuda {
namespace {

// Relative to the largest reference value of the tensor (model_test_util.h). bf16 has 8 significant bits
// (relative rounding 2^-9 = 2e-3); two layers of rounded activations stay well inside these.
constexpr double kLogitsBound = 3e-2;
constexpr double kGradBound = 6e-2;
constexpr double kLossBound = 1e-2;   // relative, of the mean loss
constexpr double kCacheBound = 2e-2;  // decode vs full forward, both on the GPU

Device gpu() { return Device::cuda(0); }

ModelOptions on_gpu() {
  ModelOptions options;
  options.device = gpu();
  return options;
}

void check_close(const Tensor& actual, const Tensor& expected, double bound, const std::string& what) {
  const RelError r = rel_error(actual, expected);
  std::fprintf(stderr, "[bf16] %-40s rel %.3g (max abs %.3g, max |ref| %.3g, bound %.3g)\n", what.c_str(), r.rel(),
               r.max_abs, r.max_ref, bound);
  expect_rel_close(actual, expected, bound, what);
}

TEST(Qwen3Cuda, LogitsMatchPyTorch) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  for (bool tied : {false, true}) {
    const Reference ref(tied);
    const Qwen3Model model = Qwen3Model::load(tiny_model_dir(tied), on_gpu());
    EXPECT_EQ(model.device(), gpu());
    EXPECT_EQ(model.compute_dtype(), DType::BF16);
    const Tensor logits = model.forward(ref.get("input_ids").to(gpu()));
    EXPECT_EQ(logits.device(), gpu());
    EXPECT_EQ(logits.dtype(), DType::F32);
    check_close(logits, ref.get("logits"), kLogitsBound, tied ? "tied logits" : "logits");
  }
}

TEST(Qwen3Cuda, PackedRowsMatchPyTorch) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const Reference ref(false);
  const Qwen3Model model = Qwen3Model::load(tiny_model_dir(false), on_gpu());
  const Tensor positions = ref.get("positions").to(gpu()), segments = ref.get("segment_ids").to(gpu());
  const Tensor logits = model.forward(ref.get("input_ids").to(gpu()), &positions, &segments);
  check_close(logits, ref.get("packed.logits"), kLogitsBound, "packed logits");
}

void check_cached_decoding(const Qwen3Model& model, const Tensor& ids, const std::string& what) {
  const Tensor full = model.forward(ids.to(gpu())).to(Device::cpu());
  const int64_t batch = ids.dim(0), tokens = ids.dim(1);
  KVCache cache = model.make_cache(batch, tokens);
  const int64_t prefill = 5;
  const Tensor last = model.forward_cached(ids.narrow(1, 0, prefill).contiguous().to(gpu()), cache);
  check_close(last, full.select(1, prefill - 1).contiguous(), kCacheBound, what + ": prefill last");
  double worst = 0;
  for (int64_t t = prefill; t < tokens; ++t) {
    const Tensor step = model.forward_cached(ids.narrow(1, t, 1).contiguous().to(gpu()), cache);
    const Tensor expected = full.select(1, t).contiguous();
    worst = std::max(worst, rel_error(step, expected).rel());
    expect_rel_close(step, expected, kCacheBound, what + ": decode step " + std::to_string(t));
  }
  std::fprintf(stderr, "[bf16] %-40s rel %.3g (worst decode step, bound %.3g)\n", (what + ": decode").c_str(), worst,
               kCacheBound);
  EXPECT_EQ(cache.length(), tokens);
}

TEST(Qwen3Cuda, KvCacheDecodingMatchesFullForward) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  for (bool tied : {false, true}) {
    const Reference ref(tied);
    const Qwen3Model model = Qwen3Model::load(tiny_model_dir(tied), on_gpu());
    check_cached_decoding(model, ref.get("input_ids"), tied ? "tied" : "untied");
  }
}

TEST(Qwen3Cuda, ModeloptNvfp4MatchesQatReference) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  for (bool tied : {false, true}) {
    const Reference ref(tied);
    TempDir dir;
    const Qwen3Model model = Qwen3Model::load(quantize_tiny_modelopt(dir, tied), on_gpu());
    EXPECT_EQ(model.compute_path(), "cuda/nvfp4-w4a16");
    check_close(model.forward(ref.get("input_ids").to(gpu())), ref.get("qat.logits"), kLogitsBound,
                tied ? "tied NVFP4 logits" : "NVFP4 logits");
    check_cached_decoding(model, ref.get("input_ids"), tied ? "tied NVFP4" : "NVFP4");
  }
}

// The decode step on the GPU (model/qwen3_decode_step.h): the CUDA graph replays the eager step's kernels on the
// same inputs, so the two give the same bits; both follow forward_cached within bf16 tolerance (the graph's
// attention is planned for the whole cache, so it splits the keys differently). The graph must also survive a
// rewind of the cache and the model's RoPE table growing after the capture.
void check_decode_graph(const Qwen3Model& model, const Tensor& ids, const std::string& what) {
  const int64_t batch = ids.dim(0), tokens = ids.dim(1), prefill = 4;
  KVCache reference = model.make_cache(batch, tokens + 2);
  KVCache eager_cache = model.make_cache(batch, tokens + 2);
  KVCache graph_cache = model.make_cache(batch, tokens + 2);
  Qwen3DecodeStep eager(model, eager_cache, DecodeMode::Eager);
  Qwen3DecodeStep graph(model, graph_cache, DecodeMode::Graph);
  const Tensor head = ids.narrow(1, 0, prefill).contiguous().to(gpu());
  for (KVCache* cache : {&reference, &eager_cache, &graph_cache}) model.forward_cached(head, *cache);
  double worst = 0;
  auto step_all = [&](int64_t t, const std::string& when) {
    const Tensor expected = model.forward_cached(ids.narrow(1, t, 1).contiguous().to(gpu()), reference);
    const Tensor e = eager.run(ids_at(ids, t)).to(Device::cpu());
    const Tensor g = graph.run(ids_at(ids, t)).to(Device::cpu());
    EXPECT_EQ(to_float_vector(g), to_float_vector(e)) << what << ": graph vs eager " << when << " position " << t;
    worst = std::max(worst, rel_error(e, expected).rel());
    expect_rel_close(e, expected, kCacheBound, what + ": decode step vs forward_cached " + when);
  };
  for (int64_t t = prefill; t < tokens; ++t) step_all(t, "");
  EXPECT_GT(graph.graph_nodes(), 0u) << what;
  EXPECT_NE(graph.describe().find("CUDA graph of"), std::string::npos) << graph.describe();
  for (KVCache* cache : {&reference, &eager_cache, &graph_cache}) cache->set_length(6);
  for (int64_t t = 0; t < 2; ++t) step_all(t, "after a rewind");
  model.make_cache(1, 9000);  // grows the model's RoPE table (the steps keep their own)
  step_all(2, "after the RoPE table grew");
  std::fprintf(stderr, "[bf16] %-40s rel %.3g (decode step vs forward_cached, bound %.3g); graph of %zu nodes\n",
               (what + ": decode graph").c_str(), worst, kCacheBound, graph.graph_nodes());
}

TEST(Qwen3Cuda, DecodeGraphMatchesEagerAndForwardCached) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const Reference ref(false);
  check_decode_graph(Qwen3Model::load(tiny_model_dir(false), on_gpu()), ref.get("input_ids"), "dense");
  TempDir dir;
  check_decode_graph(Qwen3Model::load(quantize_tiny_modelopt(dir, false, /*quantize_lm_head=*/true), on_gpu()),
                     ref.get("input_ids"), "NVFP4");
}

// A W4A4 checkpoint (calibrated input_scale): on Blackwell SM 12.x (the gb10 configuration) its layers run NVFP4 x
// NVFP4 on the FP4 tensor cores, elsewhere its quantized activations' values through the W4A16 kernels; either way
// within kW4a4LogitsBound of the CPU's W4A4 forward, and through the KV cache and the decode graph within the cache
// bound of its own full forward (the fused W4A16 decode kernels are left out for W4A4 linears). The bound against
// the CPU is loose for a reason: the activations are bf16 here and fp32 there before W4A4 quantizes them, and a 2^-9
// difference moves a value across an E2M1 boundary or a block across an E4M3 scale step (tools/logit_diff.h,
// w4a4-activations; measured 0.11 on this fixture).
constexpr double kW4a4LogitsBound = 0.3;
TEST(Qwen3Cuda, W4a4CheckpointFollowsTheCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const Reference ref(false);
  TempDir dir;
  const fs::path path = quantize_tiny_w4a4(dir, false);
  const Qwen3Model cpu = Qwen3Model::load(path);
  const Qwen3Model model = Qwen3Model::load(path, on_gpu());
  const bool fp4 = nvfp4_w4a4_native(gpu());
  if (fp4)  // "cuda/nvfp4-mma-fp4 + cuda/nvfp4-w4a16", or cuBLASLt's with where it runs
    EXPECT_EQ(model.compute_path().rfind(nvfp4_w4a4_compute_path(gpu()), 0), 0u) << model.compute_path();
  else
    EXPECT_EQ(model.compute_path(), "cuda/nvfp4-w4a16 (W4A4 layers: their NVFP4 activations' values)");
  const Tensor ids = ref.get("input_ids");
  const Tensor logits = model.forward(ids.to(gpu()));
  check_close(logits, cpu.forward(ids), kW4a4LogitsBound, fp4 ? "W4A4 logits (FP4 tensor cores)" : "W4A4 logits");
  check_cached_decoding(model, ids, "W4A4");
  check_decode_graph(model, ids, "W4A4");
#if NVFP4LM_CUDA_EMULATION
  // The emulated device presenting a B200 (sm_100): the layers on cuBLASLt's block-scaled FP4 matmul where no KV
  // cache asks for batch invariance (the full forward), the exact values through the W4A16 kernels where one does;
  // the same exact products either way (the emulated cuBLASLt and FP4 mma both sum them exactly).
  const test::EmulatedArch b200(100);
  const Qwen3Model on_b200 = Qwen3Model::load(path, on_gpu());
  EXPECT_EQ(on_b200.compute_path(),
            "cuda/nvfp4-cublaslt-fp4 (W4A4 layers without a KV cache; with one, their NVFP4 activations' values) + "
            "cuda/nvfp4-w4a16");
  check_close(on_b200.forward(ids.to(gpu())), cpu.forward(ids), kW4a4LogitsBound, "W4A4 logits (cuBLASLt FP4)");
  check_decode_graph(on_b200, ids, "W4A4 (cuBLASLt FP4)");
#endif
}

// Greedy continuation of `prompt` through the KV cache, `count` tokens; also the top-2 margin of each step's logits.
struct Greedy {
  std::vector<int32_t> tokens;
  std::vector<float> margins;
};

Greedy greedy(const Qwen3Model& model, const std::vector<int32_t>& prompt, int64_t count) {
  KVCache cache = model.make_cache(1, static_cast<int64_t>(prompt.size()) + count);
  Greedy out;
  Tensor ids = Tensor::from_ints(prompt, Shape{1, static_cast<int64_t>(prompt.size())});
  for (int64_t step = 0; step < count; ++step) {
    const Tensor logits = model.forward_cached(ids.to(model.device()), cache).to(Device::cpu()).contiguous();
    const float* row = logits.data<float>();
    const int64_t vocab = logits.dim(1);
    std::vector<float> sorted(row, row + vocab);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    const auto next = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
    out.tokens.push_back(next);
    out.margins.push_back(sorted[0] - sorted[1]);
    ids = Tensor::from_ints({next}, Shape{1, 1});
  }
  return out;
}

// GPU and CPU greedy continuations agree, or first differ where the CPU's top two logits are within bf16 noise (a
// random tiny model has near ties; what differs after a different token says nothing).
TEST(Qwen3Cuda, GreedyGenerationAgreesWithCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  for (bool tied : {false, true}) {
    const Reference ref(tied);
    const Tensor ids = ref.get("input_ids");
    std::vector<int32_t> prompt(ids.data<int32_t>(), ids.data<int32_t>() + ids.dim(1));  // row 0
    const Qwen3Model cpu = Qwen3Model::load(tiny_model_dir(tied));
    const Qwen3Model cuda = Qwen3Model::load(tiny_model_dir(tied), on_gpu());
    const int64_t count = 24;
    const Greedy expected = greedy(cpu, prompt, count), actual = greedy(cuda, prompt, count);
    size_t same = 0;
    while (same < expected.tokens.size() && expected.tokens[same] == actual.tokens[same]) ++same;
    std::fprintf(stderr, "[bf16] %s greedy: %zu of %lld tokens agree\n", tied ? "tied" : "untied", same,
                 static_cast<long long>(count));
    if (same < expected.tokens.size()) {
      // Logit spread of the model (for a scale): the fixture's logits are O(1).
      EXPECT_LT(expected.margins[same], 0.05f)
          << (tied ? "tied" : "untied") << ": GPU picked " << actual.tokens[same] << ", CPU " << expected.tokens[same]
          << " at step " << same << " although the CPU's top-2 margin is " << expected.margins[same];
    }
  }
}

struct TrainCase {
  const char* name;
  bool tied;
  const char* prefix;
  QatMode qat;
  bool packed_rows;
  Recompute recompute = Recompute::None;
  bool packed_weights = false;
};

void check_training_pass(const TrainCase& c) {
  const Reference ref(c.tied);
  TrainModelOptions options;
  options.device = gpu();
  options.qat = c.qat;
  options.recompute = c.recompute;
  options.packed_weights = c.packed_weights;
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(c.tied), options);
  const TrainBatch batch = ref.batch(c.packed_rows);
  const int64_t tokens = count_loss_tokens(batch);
  const LossStats stats = model.forward_backward(batch, 1.0f / static_cast<float>(tokens));
  EXPECT_EQ(stats.tokens, tokens);
  const double ref_loss = ref.get(std::string(c.prefix) + "loss").data<float>()[0];
  std::fprintf(stderr, "[bf16] %-40s loss %.6f vs %.6f (rel %.3g, bound %.3g)\n", c.name, stats.mean(), ref_loss,
               std::fabs(stats.mean() - ref_loss) / ref_loss, kLossBound);
  EXPECT_NEAR(stats.mean(), ref_loss, kLossBound * ref_loss) << c.name;
  double worst = 0;
  std::string worst_name;
  for (const Parameter& p : model.parameters()) {
    EXPECT_EQ(p.grad.device(), gpu()) << p.name;
    const Tensor expected = ref.get(std::string(c.prefix) + "grad." + p.name);
    const double rel = rel_error(p.grad, expected).rel();
    if (rel > worst) worst = rel, worst_name = p.name;
    expect_rel_close(p.grad, expected, kGradBound, std::string(c.name) + " grad of " + p.name);
  }
  std::fprintf(stderr, "[bf16] %-40s worst grad rel %.3g (%s, bound %.3g)\n", c.name, worst, worst_name.c_str(),
               kGradBound);
}

TEST(Qwen3Cuda, TrainingGradientsMatchPyTorch) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  for (const TrainCase& c :
       {TrainCase{"plain", false, "", QatMode::Off, false},
        TrainCase{"qat w4a16", false, "qat.", QatMode::W4A16, false},
        TrainCase{"packed rows", false, "packed.", QatMode::Off, true},
        TrainCase{"tied qat w4a16", true, "qat.", QatMode::W4A16, false},
        TrainCase{"qat recompute+packed weights", false, "qat.", QatMode::W4A16, false, Recompute::Block, true}}) {
    SCOPED_TRACE(c.name);
    check_training_pass(c);
  }
}

// Distillation (QAD) on the device: an NVFP4 W4A16 student learning from a frozen BF16 teacher (the tied fixture;
// train/train_setup.cpp builds teachers the same way) follows the same pass on the CPU: loss, KL, agreement and every
// gradient within the BF16 bounds above.
TEST(Qwen3Cuda, DistillationFollowsTheCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const Reference ref(false);
  const TrainBatch batch = ref.batch(true);
  const float grad_scale = 1.0f / static_cast<float>(count_loss_tokens(batch));
  auto run = [&](Device device) {
    TrainModelOptions teacher_options;
    teacher_options.qat = QatMode::Off;
    teacher_options.train_last_layers = 0;
    teacher_options.device = device;
    teacher_options.bf16_master = !device.is_cpu();
    TrainModelOptions student_options;
    student_options.device = device;
    auto teacher = std::make_unique<Qwen3Trainable>(Qwen3Trainable::from_files(*open_tiny(true), teacher_options));
    auto student = std::make_unique<Qwen3Trainable>(Qwen3Trainable::from_files(*open_tiny(false), student_options));
    TrainLoss loss;
    loss.teacher = teacher.get();
    loss.distillation = {2.0f, 0.8f};
    const LossStats stats = student->forward_backward(batch, grad_scale, loss);
    return std::make_pair(stats, std::move(student));
  };
  const auto [cpu, cpu_model] = run(Device::cpu());
  const auto [cuda, cuda_model] = run(gpu());
  std::fprintf(stderr, "[bf16] distillation loss %.6f vs cpu %.6f, kl %.6f vs %.6f, agree %lld vs %lld of %lld\n",
               cuda.mean(), cpu.mean(), cuda.mean_kl(), cpu.mean_kl(), static_cast<long long>(cuda.agree),
               static_cast<long long>(cpu.agree), static_cast<long long>(cpu.tokens));
  EXPECT_EQ(cuda.tokens, cpu.tokens);
  EXPECT_NEAR(cuda.mean(), cpu.mean(), kLossBound * cpu.mean());
  EXPECT_NEAR(cuda.mean_kl(), cpu.mean_kl(), 0.05 * cpu.mean_kl() + 1e-3);
  EXPECT_LE(std::abs(cuda.agree - cpu.agree), 1 + cpu.tokens / 10);
  for (size_t i = 0; i < cpu_model->parameters().size(); ++i) {
    const Parameter& p = cuda_model->parameters()[i];
    expect_rel_close(p.grad, cpu_model->parameters()[i].grad, kGradBound, "distillation grad of " + p.name);
  }
}

// LoRA on the device (model/lora.h: the adapters through cuBLASLt GEMMs, the base frozen): over an NVFP4 ModelOpt base
// kept packed (the file's bits) and over a dense base quantized once with --lora-dropout 0.2, with recompute per block,
// the loss and every
// adapter's gradient follow the same pass on the CPU within the BF16 bounds; the adapters' masters stay F32 on the
// device and their gradients are not zero.
TEST(Qwen3Cuda, LoraFollowsTheCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  TempDir dir;
  const fs::path nvfp4 = quantize_tiny_modelopt(dir, false);
  const Reference ref(false);
  TrainBatch batch = ref.batch(true);
  batch.dropout_seed = 5;
  const float grad_scale = 1.0f / static_cast<float>(count_loss_tokens(batch));
  for (const bool stored_nvfp4 : {true, false}) {
    SCOPED_TRACE(stored_nvfp4 ? "NVFP4 base" : "dense base, dropout");
    auto run = [&](Device device) {
      TrainModelOptions options;
      options.device = device;
      options.lora.rank = 4;
      options.lora.alpha = 8;
      options.lora.seed = 3;
      options.recompute = Recompute::Block;
      options.lora.dropout = stored_nvfp4 ? 0.0 : 0.2;  // the same counter-based mask on both devices
      auto model = std::make_unique<Qwen3Trainable>(
          Qwen3Trainable::from_files(stored_nvfp4 ? *open_model(nvfp4) : *open_tiny(false), options));
      uint64_t seed = 50;
      for (Parameter& p : model->parameters()) {
        if (p.name.find("lora_B") == std::string::npos) continue;
        std::vector<float> values(static_cast<size_t>(p.value.numel()));
        for (size_t i = 0; i < values.size(); ++i) values[i] = 0.4f * (counter_uniform(seed, i) - 0.5f);
        ++seed;
        p.value.copy_from(Tensor::from_floats(values, p.value.shape()).to(device));
      }
      model->refresh_quantized();
      const LossStats stats = model->forward_backward(batch, grad_scale);
      return std::make_pair(stats, std::move(model));
    };
    const auto [cpu, cpu_model] = run(Device::cpu());
    const auto [cuda, cuda_model] = run(gpu());
    std::fprintf(stderr, "[bf16] lora loss %.6f vs cpu %.6f\n", cuda.mean(), cpu.mean());
    EXPECT_NEAR(cuda.mean(), cpu.mean(), kLossBound * cpu.mean());
    ASSERT_EQ(cuda_model->parameters().size(), 28u);
    for (size_t i = 0; i < cpu_model->parameters().size(); ++i) {
      const Parameter& p = cuda_model->parameters()[i];
      EXPECT_EQ(p.value.dtype(), DType::F32);
      EXPECT_EQ(p.grad.device(), gpu());
      const std::vector<float> g = to_float_vector(p.grad.to(Device::cpu()));
      EXPECT_TRUE(std::any_of(g.begin(), g.end(), [](float v) { return v != 0; })) << p.name;
      expect_rel_close(p.grad, cpu_model->parameters()[i].grad, kGradBound, "lora grad of " + p.name);
    }
  }
}

// LoRA adapters applied at run time (model/lora_runtime.h) on the GPU follow the CPU over an NVFP4 base: each
// adapter's full-forward logits, and decode steps whose three rows use the two adapters and the base (each row
// prefilled with its own adapter into its own cache row); the captured graph gives the eager step's bits.
TEST(Qwen3Cuda, LoraAdaptersAtRunTimeFollowTheCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  TempDir dir;
  const fs::path base = quantize_tiny_modelopt(dir, false);
  // B small enough that bf16's roundings of the adapter's term stay inside the bound, large enough that each adapter
  // moves the logits by several bounds (checked below).
  RandomAdapter every;
  every.b_bound = 0.1f;
  RandomAdapter mlp;
  mlp.seed = 2;
  mlp.rank = 8;
  mlp.alpha = 4;
  mlp.targets = {LoraTarget::Gate, LoraTarget::Up, LoraTarget::Down};
  std::vector<LoraAdapterSpec> files = {{"every", dir / "every"}, {"mlp", dir / "mlp"}};
  Qwen3Model cpu = Qwen3Model::load(base), cuda = Qwen3Model::load(base, on_gpu());
  write_random_adapter(files[0].dir, cpu.config(), every);
  write_random_adapter(files[1].dir, cpu.config(), mlp);
  for (Qwen3Model* model : {&cpu, &cuda})
    model->set_lora_adapters(std::make_shared<const LoraAdapterSet>(
        LoraAdapterSet::load(files, model->config(), model->compute_dtype(), model->device())));
  const Reference ref(false);
  const Tensor ids = ref.get("input_ids").narrow(0, 0, 1).contiguous();
  const Tensor base_logits = cpu.forward(ids);
  for (const int adapter : {kNoLoraAdapter, 0, 1}) {
    const Tensor expected = cpu.forward(ids, nullptr, nullptr, adapter);
    check_close(cuda.forward(ids.to(gpu()), nullptr, nullptr, adapter), expected, kLogitsBound,
                "lora forward, adapter " + std::to_string(adapter));
    if (adapter != kNoLoraAdapter) {
      std::fprintf(stderr, "[bf16] adapter %d moves the CPU's logits by rel %.3g\n", adapter,
                   rel_error(expected, base_logits).rel());
      EXPECT_GT(rel_error(expected, base_logits).rel(), 3 * kLogitsBound) << "adapter " << adapter << " hardly acts";
    }
  }

  const int64_t tokens = ids.dim(1), prefill = 4;
  KVCache cpu_pool = cpu.make_cache(3, tokens), eager_pool = cuda.make_cache(3, tokens),
          graph_pool = cuda.make_cache(3, tokens);
  const Tensor head = ids.narrow(1, 0, prefill).contiguous();
  for (int row = 0; row < 3; ++row) {
    KVCache cpu_row = cpu_pool.row_view(row), eager_row = eager_pool.row_view(row),
            graph_row = graph_pool.row_view(row);
    cpu.forward_cached(head, cpu_row, false, row - 1);
    cuda.forward_cached(head.to(gpu()), eager_row, false, row - 1);
    cuda.forward_cached(head.to(gpu()), graph_row, false, row - 1);
  }
  Qwen3DecodeStep cpu_step(cpu, cpu_pool, DecodeMode::Eager, 3), eager(cuda, eager_pool, DecodeMode::Eager, 3),
      graph(cuda, graph_pool, DecodeMode::Graph, 3);
  for (int64_t t = prefill; t < tokens; ++t) {
    std::vector<DecodeRow> rows;
    for (int row = 0; row < 3; ++row) rows.push_back({ids.data<int32_t>()[t], static_cast<int32_t>(t), row, row - 1});
    const Tensor expected = cpu_step.run_rows(rows).clone();
    const Tensor e = eager.run_rows(rows).to(Device::cpu());
    const Tensor g = graph.run_rows(rows).to(Device::cpu());
    EXPECT_EQ(to_float_vector(g), to_float_vector(e)) << "graph vs eager at position " << t;
    check_close(e, expected, kLogitsBound, "lora decode rows at " + std::to_string(t));
  }
  EXPECT_GT(graph.graph_nodes(), 0u);
}

// The same with the teacher's top 16 carried by the batch (a teacher cache): the loss head's K + 1-outcome form.
TEST(Qwen3Cuda, DistillationFromATopKCacheFollowsTheCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const Reference ref(false);
  TrainBatch batch = ref.batch(true);
  const float grad_scale = 1.0f / static_cast<float>(count_loss_tokens(batch));
  {
    TrainModelOptions teacher_options;
    teacher_options.qat = QatMode::Off;
    teacher_options.train_last_layers = 0;
    Qwen3Trainable teacher = Qwen3Trainable::from_files(*open_tiny(true), teacher_options);
    const Tensor logits = teacher.inference_model().forward(batch.ids, &batch.positions, &batch.segment_ids);
    const int64_t vocab = logits.dim(2);
    const int32_t* target = batch.targets.data<int32_t>();
    std::vector<float> rows;
    for (int64_t i = 0; i < batch.targets.numel(); ++i)
      if (target[i] != kIgnoreIndex)
        rows.insert(rows.end(), logits.data<float>() + i * vocab, logits.data<float>() + (i + 1) * vocab);
    const auto m = static_cast<int64_t>(rows.size()) / vocab;
    batch.teacher_top_k = select_teacher_top_k(Tensor::from_floats(rows, {m, vocab}), 16, 2.0f);
  }
  auto run = [&](Device device) {
    TrainModelOptions student_options;
    student_options.device = device;
    auto student = std::make_unique<Qwen3Trainable>(Qwen3Trainable::from_files(*open_tiny(false), student_options));
    TrainLoss loss;
    loss.cached_teacher = true;
    loss.distillation = {2.0f, 0.8f};
    const LossStats stats = student->forward_backward(batch, grad_scale, loss);
    return std::make_pair(stats, std::move(student));
  };
  const auto [cpu, cpu_model] = run(Device::cpu());
  const auto [cuda, cuda_model] = run(gpu());
  EXPECT_EQ(cuda.tokens, cpu.tokens);
  EXPECT_GT(cpu.mean_kl(), 0.0);
  EXPECT_NEAR(cuda.mean(), cpu.mean(), kLossBound * cpu.mean());
  EXPECT_NEAR(cuda.mean_kl(), cpu.mean_kl(), 0.05 * cpu.mean_kl() + 1e-3);
  for (size_t i = 0; i < cpu_model->parameters().size(); ++i) {
    const Parameter& p = cuda_model->parameters()[i];
    expect_rel_close(p.grad, cpu_model->parameters()[i].grad, kGradBound, "cached distillation grad of " + p.name);
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_cuda
