// Shared by the tests of the optimizer step and the QAT refresh that follows it (tests/train/test_fused_update.cpp,
// test_update_amax.cpp, cuda/test_update_amax_cuda.cpp): a small random Qwen3 and batches for it, the bytes of every
// weight a model's forward reads, and the check that a refresh given the update's amaxes (UpdatedMasterAmaxes)
// writes exactly the forward weights of a refresh that measures every amax itself.
// Header-only (inline) because tests/<layer>/ globs only test_*.cpp into each layer's executable.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "io/synth_model.h"
#include "model/qwen3_trainable.h"
#include "train/optim/optimizer.h"
#include "train/train_step.h"
#include "trainer_test_support.h"

namespace nvfp4lm::test {

// The tiny preset with 3 layers and a 384-token vocabulary, tied or untied.
inline Qwen3Config small_config(bool tied) {
  Qwen3Config c = qwen3_preset("tiny");
  c.num_hidden_layers = 3;
  c.vocab_size = 384;
  c.tie_word_embeddings = tied;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

// Random ids and targets, every 4th target ignored.
inline TrainBatch random_batch(int64_t rows, int64_t tokens, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(rows * tokens)), targets(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
    targets[i] = i % 4 == 0 ? -100 : static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
  }
  TrainBatch batch;
  batch.ids = Tensor::from_ints(ids, Shape{rows, tokens});
  batch.targets = Tensor::from_ints(targets, Shape{rows, tokens});
  return batch;
}

// The bytes of every weight the forward reads (inference_model() shares them): dense copies (deq(Q(W)) under QAT),
// or packed codes, block scales and the tensor scale.
inline std::map<std::string, std::string> forward_weight_bytes(const Qwen3Trainable& model) {
  const Qwen3Model inference = model.inference_model();
  const Qwen3Weights& w = inference.weights();
  std::vector<NamedTensor> tensors;
  auto linear = [&](const std::string& name, const LinearWeight& weight) {
    if (weight.is_nvfp4()) {
      tensors.push_back({name + ".codes", weight.nvfp4.codes});
      tensors.push_back({name + ".block_scales", weight.nvfp4.block_scales});
      tensors.push_back({name + ".tensor_scale", Tensor::from_floats({weight.nvfp4.tensor_scale}, Shape{1})});
    } else {
      tensors.push_back({name, weight.dense});
    }
  };
  tensors.push_back({"embed_tokens", w.embed_tokens});
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const Qwen3LayerWeights& layer = w.layers[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    for (const auto& [name, tensor] : {std::pair{"input_norm", &layer.input_norm},
                                       {"q_norm", &layer.q_norm},
                                       {"k_norm", &layer.k_norm},
                                       {"post_attention_norm", &layer.post_attention_norm}})
      tensors.push_back({p + name, *tensor});
    for (const auto& [name, weight] : {std::pair{"q_proj", &layer.q_proj},
                                       {"k_proj", &layer.k_proj},
                                       {"v_proj", &layer.v_proj},
                                       {"o_proj", &layer.o_proj},
                                       {"gate_proj", &layer.gate_proj},
                                       {"up_proj", &layer.up_proj},
                                       {"down_proj", &layer.down_proj}})
      linear(p + name, *weight);
  }
  tensors.push_back({"final_norm", w.final_norm});
  linear("lm_head", w.lm_head);
  return tensor_bytes(tensors);
}

// The trained masters a refresh quantizes: the block projections and a quantized lm_head (tied: the embedding).
inline size_t quantized_trained_masters(const Qwen3Trainable& model) {
  if (model.options().qat == QatMode::Off) return 0;
  size_t count = 0;
  for (const Parameter& p : model.parameters()) {
    const bool projection = p.name.find("_proj.weight") != std::string::npos;
    const bool head =
        model.options().quantize_lm_head &&
        (p.name == "lm_head.weight" || (model.config().tie_word_embeddings && p.name == "model.embed_tokens.weight"));
    if (projection || head) ++count;
  }
  return count;
}

// How an update is made: Optimizer::step with an UpdatedMasterAmaxes and refresh_quantized with it, apply_update
// (train_step.h; the same inside), or fused_train_step (the update inside the backward, one group at a time).
enum class UpdateForm { StepAndRefresh, ApplyUpdate, Fused };

struct UpdateCase {
  std::string name;
  TrainModelOptions options;  // fused_update is set from `form`
  std::string optimizer = "adamw";
  int64_t chunk_rows = 0;  // --step-chunk-rows
  UpdateForm form = UpdateForm::StepAndRefresh;
};

// Two steps of the case on `files`; after each, the forward weights the step's refresh wrote (with the update's
// amaxes) must be the bytes a refresh that measures every amax (refresh_quantized() alone) writes from the same
// masters, and must have changed (the update moved them). Every form must have had the update measure every master's
// amax, and StepAndRefresh checks that the refresh then took one per quantized trained master, i.e. skipped those
// passes (apply_update runs the same two calls).
inline void expect_refresh_equals_measuring_refresh(const ModelFiles& files, const UpdateCase& c) {
  SCOPED_TRACE(c.name);
  TrainModelOptions options = c.options;
  options.fused_update = c.form == UpdateForm::Fused;
  Qwen3Trainable model = Qwen3Trainable::from_files(files, options);
  AdamWOptions adamw;
  adamw.seed = 9;
  std::unique_ptr<Optimizer> optimizer = make_optimizer(c.optimizer, model.parameters(), adamw);
  optimizer->set_chunk_rows(c.chunk_rows);
  auto before = forward_weight_bytes(model);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step + 1));
    const TrainBatch batch = random_batch(2, 16, files.config().vocab_size, 100 + static_cast<uint64_t>(step));
    const auto grad_scale = static_cast<float>(1.0 / static_cast<double>(count_loss_tokens(batch)));
    const double lr = 3e-3 * (step + 1);
    model.zero_grad();
    if (c.form == UpdateForm::Fused) {
      const FusedStepResult result = fused_train_step(model, *optimizer, batch, grad_scale, LossKind::CrossEntropy, lr);
      ASSERT_TRUE(result.applied);
      ASSERT_TRUE(result.skipped_groups.empty());
      EXPECT_EQ(result.update_amaxes, model.parameters().size());
    } else {
      const LossStats stats = model.forward_backward(batch, grad_scale);
      if (c.form == UpdateForm::ApplyUpdate) {
        const UpdateResult result = apply_update(model, *optimizer, stats.mean(), lr, 1.0);
        ASSERT_TRUE(result.applied);
        EXPECT_EQ(result.update_amaxes, model.parameters().size());
      } else {
        UpdatedMasterAmaxes updated;
        optimizer->step(model.parameters(), lr, 1.0f, &updated);
        model.refresh_quantized(&updated);
        EXPECT_EQ(updated.taken(), quantized_trained_masters(model));
      }
    }
    const auto with_amaxes = forward_weight_bytes(model);
    model.refresh_quantized();  // measures every amax
    expect_same_bytes(with_amaxes, forward_weight_bytes(model), c.name + ": forward weights");
    EXPECT_NE(with_amaxes, before) << c.name << ": the update changed no forward weight";
    before = with_amaxes;
  }
}

}  // namespace nvfp4lm::test
