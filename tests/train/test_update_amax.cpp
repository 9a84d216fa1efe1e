// The optimizer measures the amax of the masters it writes (UpdatedMasterAmaxes, quant/master_amax.h) and the QAT
// refresh takes it instead of reading the masters again, on the CPU:
//  - AdamW and AdamW8bit, F32 and BF16 masters (stochastic rounding), whole and chunked (--step-chunk-rows): each
//    amax is the bits of tensor_amax of the updated master; a non-finite updated master gives the refresh
//    pass's error, word for word (the first non-finite element by its index in the whole parameter);
//  - each amax is given out once and only for the master it was measured on;
//  - the forward weights after a step (Optimizer::step + refresh_quantized, apply_update, the fused update) are the
//    bytes of a refresh that measures every amax, for QAT modes, block shapes, packed weights, quantized heads;
//  - the fused refresh really takes the update's amaxes (a sink that breaks the contract shows it), and a refresh
//    without them (after a checkpoint load, say) measures.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/numeric.h"
#include "quant/master_amax.h"
#include "quant/nvfp4.h"
#include "quant/tensor_amax.h"
#include "update_refresh_support.h"

namespace nvfp4lm::test::test_update_amax {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Parameters of odd sizes (shorter than a moment block, one past it) and 2-D shapes.
std::vector<Parameter> make_parameters(DType master, Rng& rng) {
  const Shape shapes[] = {Shape{1}, Shape{17}, Shape{257}, Shape{33, 65}, Shape{7, 300}};
  std::vector<Parameter> params;
  for (const Shape& shape : shapes) {
    Parameter p;
    p.name = "layers." + std::to_string(params.size()) + ".weight";
    const Tensor values = random_normal(shape, rng, params.size() % 2 ? 1.0f : 0.02f);
    p.value = Tensor::empty(shape, master);
    convert_cpu(values, p.value);
    p.grad = random_normal(shape, rng, 0.1f);
    p.weight_decay = params.size() % 2 == 0;
    params.push_back(std::move(p));
  }
  return params;
}

std::string error_text(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

struct OptimizerCase {
  const char* kind;
  DType master;
  int64_t chunk_rows;
};

const OptimizerCase kOptimizerCases[] = {{"adamw", DType::F32, 0},      {"adamw", DType::BF16, 0},
                                         {"adamw", DType::BF16, 3},     {"adamw8bit", DType::F32, 0},
                                         {"adamw8bit", DType::BF16, 0}, {"adamw8bit", DType::F32, 5}};

std::string label(const OptimizerCase& c) {
  return fmt::format("{} {} masters, chunks of {} rows", c.kind, dtype_name(c.master), c.chunk_rows);
}

TEST(UpdateAmax, IsTheAmaxOfTheMastersTheUpdateWrote) {
  for (const OptimizerCase& c : kOptimizerCases) {
    SCOPED_TRACE(label(c));
    Rng rng(31);
    std::vector<Parameter> params = make_parameters(c.master, rng);
    AdamWOptions options;
    options.seed = 5;
    std::unique_ptr<Optimizer> optimizer = make_optimizer(c.kind, params, options);
    optimizer->set_chunk_rows(c.chunk_rows);
    for (int step = 0; step < 2; ++step) {
      const Tensor before = params[3].value.clone();
      UpdatedMasterAmaxes updated;
      optimizer->step(params, 1e-2, 0.5f, &updated);
      EXPECT_NE(std::memcmp(before.raw(), params[3].value.raw(), before.nbytes()), 0) << "no update";
      for (const Parameter& p : params) {
        const std::optional<float> amax = updated.take(p.value, p.name);
        ASSERT_TRUE(amax.has_value()) << p.name;
        EXPECT_EQ(float_bits(*amax), float_bits(tensor_amax(p.value, p.name))) << p.name << " step " << step;
      }
      EXPECT_EQ(updated.taken(), params.size());
    }
  }
}

TEST(UpdateAmax, GivesEachAmaxOnceAndOnlyForItsMaster) {
  Rng rng(32);
  std::vector<Parameter> params = make_parameters(DType::F32, rng);
  std::unique_ptr<Optimizer> optimizer = make_optimizer("adamw", params, AdamWOptions{});
  const Tensor other = params[3].value.clone();  // same values, other memory
  UpdatedMasterAmaxes updated;
  EXPECT_EQ(updated.recorded(), 0u);
  EXPECT_FALSE(updated.take(params[3].value, "before any update").has_value());
  optimizer->step(params, 1e-3, 1.0f, &updated);
  EXPECT_EQ(updated.recorded(), params.size());
  EXPECT_FALSE(updated.take(other, "a copy").has_value());
  EXPECT_FALSE(updated.take(params[3].value.narrow(0, 0, 10), "a view of its first rows").has_value());
  EXPECT_TRUE(updated.take(params[3].value, params[3].name).has_value());
  EXPECT_FALSE(updated.take(params[3].value, "the second time").has_value());
  EXPECT_EQ(updated.taken(), 1u);
  // One update per object: a second one into it is a bug of the caller.
  EXPECT_THROW(optimizer->step(params, 1e-3, 1.0f, &updated), Error);
}

TEST(UpdateAmax, NonFiniteMasterIsTheRefreshPassError) {
  // The first non-finite element of [33, 65] at row 20, column 7 (NaN, an -inf after it), or the last element.
  struct Place {
    int64_t row, col;
    float value;
  };
  for (const OptimizerCase& c : kOptimizerCases) {
    for (const Place place : {Place{20, 7, kNan}, Place{32, 64, kInf}}) {
      SCOPED_TRACE(fmt::format("{}, row {}", label(c), place.row));
      Rng rng(33);
      std::vector<Parameter> params = make_parameters(c.master, rng);
      Tensor values = Tensor::empty({33, 65}, DType::F32);
      convert_cpu(params[3].value, values);
      values.data<float>()[place.row * 65 + place.col] = place.value;
      if (place.row < 30) values.data<float>()[30 * 65 + 1] = -kInf;
      convert_cpu(values, params[3].value);
      std::unique_ptr<Optimizer> optimizer = make_optimizer(c.kind, params, AdamWOptions{});
      optimizer->set_chunk_rows(c.chunk_rows);
      UpdatedMasterAmaxes updated;
      optimizer->step(params, 1e-3, 1.0f, &updated);
      const std::string& name = params[3].name;
      const std::string measured = error_text([&] { tensor_amax(params[3].value, name); });
      ASSERT_NE(measured.find(fmt::format("row {}, column {}", place.row, place.col)), std::string::npos) << measured;
      EXPECT_EQ(error_text([&] { updated.take(params[3].value, name); }), measured);
      EXPECT_EQ(float_bits(*updated.take(params[4].value, params[4].name)),
                float_bits(tensor_amax(params[4].value, "")));  // the others stay usable
    }
  }
}

TEST(UpdateAmax, RefreshWritesTheForwardWeightsOfAMeasuringRefresh) {
  const std::unique_ptr<ModelFiles> untied = random_model_files(small_config(false), "untied", 1);
  const std::unique_ptr<ModelFiles> tied = random_model_files(small_config(true), "tied", 2);
  TrainModelOptions bf16{QatMode::W4A16};
  bf16.bf16_master = true;
  TrainModelOptions low_memory = bf16;  // the low-memory recipe
  low_memory.recompute = Recompute::Block;
  low_memory.packed_weights = true;
  TrainModelOptions tiles{QatMode::W4A16};
  tiles.block = Nvfp4Block::Tile16x16;
  TrainModelOptions w4a4{QatMode::W4A4};
  w4a4.quantize_lm_head = true;
  TrainModelOptions head{QatMode::W4A16};
  head.quantize_lm_head = true;
  TrainModelOptions last{QatMode::W4A16};
  last.train_last_layers = 2;
  using enum UpdateForm;
  const std::pair<const ModelFiles*, UpdateCase> cases[] = {
      {untied.get(), {"fp32 adamw, step + refresh", TrainModelOptions{QatMode::W4A16}, "adamw", 0, StepAndRefresh}},
      {untied.get(), {"fp32 adamw, apply_update", TrainModelOptions{QatMode::W4A16}, "adamw", 0, ApplyUpdate}},
      {tied.get(), {"bf16 adamw8bit, chunked", bf16, "adamw8bit", 3, StepAndRefresh}},
      {tied.get(), {"low-memory recipe, fused", low_memory, "adamw8bit", 0, Fused}},
      {tied.get(), {"low-memory recipe, fused and chunked", low_memory, "adamw8bit", 3, Fused}},
      {untied.get(), {"bf16 adamw, fused, chunked", bf16, "adamw", 5, Fused}},
      {untied.get(), {"16x16 tiles", tiles, "adamw", 0, StepAndRefresh}},
      {untied.get(), {"w4a4, quantized head", w4a4, "adamw", 0, StepAndRefresh}},
      {tied.get(), {"quantized tied head", head, "adamw", 0, StepAndRefresh}},
      {tied.get(), {"quantized tied head, fused", head, "adamw", 0, Fused}},
      {untied.get(), {"last 2 layers", last, "adamw", 0, StepAndRefresh}},
      {untied.get(), {"qat off", TrainModelOptions{QatMode::Off}, "adamw", 0, StepAndRefresh}},
  };
  for (const auto& [files, c] : cases) expect_refresh_equals_measuring_refresh(*files, c);
}

// What the fused refresh does with the amaxes, made visible by a sink that breaks the contract: it halves the top
// block's q/k/v masters after updating them. The refresh then keeps the update's amax (it does not read the masters
// again), so q/k/v's tensor scale stays that of the masters the update wrote; refresh_quantized() without amaxes,
// as after a checkpoint load, measures the halved masters.
TEST(UpdateAmax, FusedRefreshTakesTheUpdatesAmaxAndAPlainRefreshMeasures) {
  const std::unique_ptr<ModelFiles> files = random_model_files(small_config(false), "untied", 1);
  TrainModelOptions options{QatMode::W4A16};
  options.fused_update = true;
  options.packed_weights = true;
  Qwen3Trainable model = Qwen3Trainable::from_files(*files, options);
  std::unique_ptr<Optimizer> optimizer = make_optimizer("adamw", model.parameters(), AdamWOptions{});
  const TrainBatch batch = random_batch(2, 16, files->config().vocab_size, 8);
  float updated_amax = 0.0f;  // joint q/k/v amax of the top block as updated
  const GradientSink sink = [&](std::span<Parameter> group, UpdatedMasterAmaxes& updated) {
    optimizer->update_parameters(group, &updated);
    for (Parameter& p : group) {
      if (p.name.find("layers.2.self_attn.") == std::string::npos || p.name.find("_proj") == std::string::npos ||
          p.name.find("o_proj") != std::string::npos)
        continue;
      updated_amax = std::max(updated_amax, tensor_amax(p.value, p.name));
      float* values = p.value.data<float>();
      for (int64_t i = 0; i < p.value.numel(); ++i) values[i] *= 0.5f;  // exact
    }
  };
  optimizer->begin_step(1e-2);
  model.forward_backward(batch, 0.01f, LossKind::CrossEntropy, &sink);
  optimizer->end_step();
  ASSERT_GT(updated_amax, 0.0f);
  auto q_proj_scale = [&] { return model.inference_model().weights().layers[2].q_proj.nvfp4.tensor_scale; };
  EXPECT_EQ(q_proj_scale(), nvfp4_tensor_scale(updated_amax));
  model.refresh_quantized();
  EXPECT_EQ(q_proj_scale(), nvfp4_tensor_scale(0.5f * updated_amax));
}

// A master the update made non-finite: the refresh after the update reports it as the measuring refresh does (and
// as it did before the amax came from the optimizer), in both forms of the step.
TEST(UpdateAmax, NonFiniteUpdatedMasterStopsTheRefreshWithTheSameError) {
  const std::unique_ptr<ModelFiles> files = random_model_files(small_config(false), "untied", 1);
  const std::string name = "model.layers.1.mlp.up_proj.weight";
  auto poison = [&](std::span<Parameter> group) {
    for (Parameter& p : group)
      if (p.name == name) p.value.data<float>()[3 * p.value.dim(1) + 5] = kNan;  // NaN * decay + step = NaN
  };
  const TrainBatch batch = random_batch(2, 16, files->config().vocab_size, 8);
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "step + refresh");
    TrainModelOptions options{QatMode::W4A16};
    options.fused_update = fused;
    Qwen3Trainable model = Qwen3Trainable::from_files(*files, options);
    std::unique_ptr<Optimizer> optimizer = make_optimizer("adamw", model.parameters(), AdamWOptions{});
    std::string with_amaxes;
    if (fused) {
      const GradientSink sink = [&](std::span<Parameter> group, UpdatedMasterAmaxes& updated) {
        poison(group);
        optimizer->update_parameters(group, &updated);
      };
      optimizer->begin_step(1e-3);
      with_amaxes = error_text([&] { model.forward_backward(batch, 0.01f, LossKind::CrossEntropy, &sink); });
    } else {
      model.forward_backward(batch, 0.01f);
      poison(model.parameters());
      UpdatedMasterAmaxes updated;
      optimizer->step(model.parameters(), 1e-3, 1.0f, &updated);
      with_amaxes = error_text([&] { model.refresh_quantized(&updated); });
    }
    EXPECT_NE(with_amaxes.find(name + ": non-finite value nan at row 3, column 5"), std::string::npos) << with_amaxes;
    EXPECT_EQ(with_amaxes, error_text([&] { model.refresh_quantized(); }));
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_update_amax
