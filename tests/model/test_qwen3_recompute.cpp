// The memory modes of model/qwen3_trainable.h change memory, never results:
//  - Recompute::Block: the loss and every gradient are bit-identical to keeping all activations, for every QAT
//    mode, packed rows and train_last_layers; the backward's peak is lower (one block's activations, not all);
//  - packed_weights: bit-identical losses, gradients and refreshed weights over optimizer steps, with or without
//    recompute; the model's own footprint is lower (packed Q(W) + one block of scratch instead of dense copies).
#include <gtest/gtest.h>

#include <map>

#include "core/memory.h"
#include "io/synth_model.h"
#include "model_test_util.h"

namespace nvfp4lm::test::test_qwen3_recompute {
namespace {

// A 4-layer model (the fixtures have 2, which leaves no block that is neither the first nor the top one).
Qwen3Config four_layer_config() {
  Qwen3Config c = qwen3_preset("tiny");
  c.num_hidden_layers = 4;
  c.vocab_size = 512;
  c.tie_word_embeddings = false;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

TrainBatch random_batch(int64_t rows, int64_t tokens, int64_t vocab, uint64_t seed, bool packed) {
  Rng rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(rows * tokens)), targets(ids.size()), positions(ids.size()),
      segments(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
    targets[i] = i % 5 == 0 ? -100 : static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
    const auto t = static_cast<int64_t>(i) % tokens;
    segments[i] = static_cast<int32_t>(t < tokens / 3 ? 0 : 1);
    positions[i] = static_cast<int32_t>(t < tokens / 3 ? t : t - tokens / 3);
  }
  TrainBatch batch;
  batch.ids = Tensor::from_ints(ids, Shape{rows, tokens});
  batch.targets = Tensor::from_ints(targets, Shape{rows, tokens});
  if (packed) {
    batch.positions = Tensor::from_ints(positions, Shape{rows, tokens});
    batch.segment_ids = Tensor::from_ints(segments, Shape{rows, tokens});
  }
  return batch;
}

struct Result {
  LossStats stats;
  std::map<std::string, std::vector<float>> grads;
  size_t backward_peak = 0;
};

Result run(const ModelFiles& files, TrainModelOptions options, Recompute recompute, const TrainBatch& batch,
           bool packed = false) {
  options.recompute = recompute;
  options.packed_weights = packed;
  Qwen3Trainable model = Qwen3Trainable::from_files(files, options);
  MemoryTracker::instance().clear_phases();
  Result r;
  r.stats = model.forward_backward(batch, 0.25f);
  for (const PhasePeak& peak : MemoryTracker::instance().phase_peaks())
    if (peak.phase == "backward" && peak.device.is_cpu()) r.backward_peak = peak.peak_bytes;
  for (const Parameter& p : model.parameters()) r.grads[p.name] = to_float_vector(p.grad);
  return r;
}

void expect_identical(const Result& a, const Result& b, const std::string& what) {
  EXPECT_EQ(a.stats.loss_sum, b.stats.loss_sum) << what;
  EXPECT_EQ(a.stats.correct, b.stats.correct) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size()) << what;
  for (const auto& [name, grad] : a.grads) EXPECT_EQ(grad, b.grads.at(name)) << what << ": grad of " << name;
}

TEST(Qwen3Recompute, BlockRecomputeGivesBitIdenticalGradients) {
  const Qwen3Config config = four_layer_config();
  const std::unique_ptr<ModelFiles> files = random_model_files(config, "four-layer", 7);
  struct Mode {
    const char* name;
    TrainModelOptions options;
    bool packed;
  };
  std::vector<Mode> modes;
  modes.push_back({"qat off", TrainModelOptions{QatMode::Off}, false});
  modes.push_back({"w4a16", TrainModelOptions{QatMode::W4A16}, false});
  modes.push_back({"w4a16 packed", TrainModelOptions{QatMode::W4A16}, true});
  TrainModelOptions w4a4{QatMode::W4A4};
  w4a4.block = Nvfp4Block::Tile16x16;
  w4a4.quantize_lm_head = true;
  modes.push_back({"w4a4 2d, lm_head quantized", w4a4, false});
  TrainModelOptions last_two{QatMode::W4A16};
  last_two.train_last_layers = 2;
  modes.push_back({"last 2 layers", last_two, true});
  TrainModelOptions top_only{QatMode::W4A16};
  top_only.train_last_layers = 1;
  modes.push_back({"top layer only", top_only, false});

  const TrainBatch plain = random_batch(2, 24, config.vocab_size, 11, false);
  const TrainBatch packed = random_batch(2, 24, config.vocab_size, 11, true);
  for (const Mode& mode : modes) {
    const TrainBatch& batch = mode.packed ? packed : plain;
    const Result saved = run(*files, mode.options, Recompute::None, batch);
    const Result recomputed = run(*files, mode.options, Recompute::Block, batch);
    ASSERT_FALSE(saved.grads.empty()) << mode.name;
    expect_identical(saved, recomputed, mode.name);
  }
}

TEST(Qwen3Recompute, BlockRecomputeLowersTheBackwardPeak) {
  Qwen3Config config = four_layer_config();
  config.num_hidden_layers = 6;
  const std::unique_ptr<ModelFiles> files = random_model_files(config, "six-layer", 3);
  const TrainBatch batch = random_batch(4, 64, config.vocab_size, 5, false);
  const Result saved = run(*files, TrainModelOptions{QatMode::W4A16}, Recompute::None, batch);
  const Result recomputed = run(*files, TrainModelOptions{QatMode::W4A16}, Recompute::Block, batch);
  expect_identical(saved, recomputed, "6 layers");
  ASSERT_GT(saved.backward_peak, 0u);
  // Activations are ~30 tensors a block, about 26 of them as large as the residual stream or larger; with six
  // blocks the saved set dominates the backward's peak. Recompute keeps one set: expect well under half.
  EXPECT_LT(static_cast<double>(recomputed.backward_peak), 0.6 * static_cast<double>(saved.backward_peak))
      << "backward peak " << recomputed.backward_peak << " bytes with recompute, " << saved.backward_peak << " without";
}

TEST(Qwen3PackedWeights, BitIdenticalGradientsAndLowerFootprint) {
  const Qwen3Config config = four_layer_config();
  const std::unique_ptr<ModelFiles> files = random_model_files(config, "four-layer", 7);
  const TrainBatch plain = random_batch(2, 24, config.vocab_size, 11, false);
  const TrainBatch packed_rows = random_batch(2, 24, config.vocab_size, 12, true);
  TrainModelOptions w4a4{QatMode::W4A4};
  w4a4.block = Nvfp4Block::Tile16x16;
  TrainModelOptions last_two{QatMode::W4A16};
  last_two.train_last_layers = 2;
  for (const auto& [name, options] : std::vector<std::pair<const char*, TrainModelOptions>>{
           {"w4a16", TrainModelOptions{QatMode::W4A16}}, {"w4a4 2d", w4a4}, {"last 2 layers", last_two}}) {
    for (Recompute recompute : {Recompute::None, Recompute::Block}) {
      for (const TrainBatch* batch : {&plain, &packed_rows}) {
        const Result dense = run(*files, options, recompute, *batch, false);
        const Result packed = run(*files, options, recompute, *batch, true);
        expect_identical(dense, packed, std::string(name) + (recompute == Recompute::Block ? " + recompute" : ""));
      }
    }
  }
  // Footprint of the model itself: F32 masters + dense deq(Q(W)) copies vs masters + packed codes + one block.
  MemoryTracker& tracker = MemoryTracker::instance();
  size_t bytes[2];
  for (int packed = 0; packed < 2; ++packed) {
    const size_t before = tracker.current_bytes(Device::cpu());
    TrainModelOptions options{QatMode::W4A16};
    options.packed_weights = packed != 0;
    const Qwen3Trainable model = Qwen3Trainable::from_files(*files, options);
    bytes[packed] = tracker.current_bytes(Device::cpu()) - before;
    EXPECT_EQ(model.describe().find("kept packed") != std::string::npos, packed != 0) << model.describe();
  }
  const Qwen3Config& c = config;
  const int64_t projections =
      c.hidden_size * (2 * c.q_dim() + 2 * c.kv_dim()) + 3 * c.hidden_size * c.intermediate_size;
  // Dense copies: 4 layers x projections x 4 bytes. Packed: 4 layers x (0.5 + 1/16) bytes, plus one block dense.
  const auto saved = static_cast<double>(bytes[0]) - static_cast<double>(bytes[1]);
  const double expected = 4.0 * projections * 4 - 4.0 * projections * (0.5 + 1.0 / 16) - 1.0 * projections * 4;
  EXPECT_NEAR(saved, expected, 0.01 * expected);
}

TEST(Qwen3PackedWeights, OptimizerStepsStayIdentical) {
  const Qwen3Config config = four_layer_config();
  const std::unique_ptr<ModelFiles> files = random_model_files(config, "four-layer", 8);
  std::vector<std::vector<float>> losses(2), weights(2);
  for (int packed = 0; packed < 2; ++packed) {
    TrainModelOptions options{QatMode::W4A16};
    options.packed_weights = packed != 0;
    Qwen3Trainable model = Qwen3Trainable::from_files(*files, options);
    for (int step = 0; step < 3; ++step) {
      model.zero_grad();
      const LossStats stats =
          model.forward_backward(random_batch(2, 16, config.vocab_size, 40 + static_cast<uint64_t>(step), false), 0.1f);
      losses[static_cast<size_t>(packed)].push_back(static_cast<float>(stats.loss_sum));
      for (Parameter& p : model.parameters()) {  // plain SGD: enough to move every weight across NVFP4 steps
        float* w = p.value.data<float>();
        const float* g = p.grad.data<float>();
        for (int64_t i = 0; i < p.value.numel(); ++i) w[i] -= 0.5f * g[i];
      }
      model.refresh_quantized();
    }
    const Tensor logits = model.inference_model().forward(random_batch(1, 8, config.vocab_size, 3, false).ids);
    weights[static_cast<size_t>(packed)] = to_float_vector(logits);
  }
  EXPECT_EQ(losses[0], losses[1]);
  // The inference model reads the packed weights through the NVFP4 linear: equal up to summation order.
  ASSERT_EQ(weights[0].size(), weights[1].size());
  for (size_t i = 0; i < weights[0].size(); ++i) EXPECT_NEAR(weights[0][i], weights[1][i], 1e-4) << i;
}

TEST(Qwen3Recompute, NamesAndDescription) {
  EXPECT_EQ(parse_recompute("none"), Recompute::None);
  EXPECT_EQ(parse_recompute("block"), Recompute::Block);
  EXPECT_EQ(recompute_name(Recompute::Block), "block");
  expect_error([] { parse_recompute("attn"); }, {"--recompute"});
  TrainModelOptions options;
  options.recompute = Recompute::Block;
  const Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), options);
  EXPECT_NE(model.describe().find("recomputed per block"), std::string::npos) << model.describe();
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_recompute
