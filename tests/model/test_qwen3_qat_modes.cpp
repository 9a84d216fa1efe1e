// QAT modes beyond the shared fixtures, against tests/model/fixtures/qat_modes.safetensors (PyTorch, float64,
// made by tests/model/make_qat_fixtures.py): W4A4 (activation fake-quant with straight-through gradients), a
// quantized lm_head (untied, and tied under W4A4 where the embedding gets the STE gradient of the quantized head
// plus the lookup gradient). Gradients are stored for a few tensors, row-sampled; compared per tensor as
// max |diff| / max |ref|. Also: bf16 masters, and the QAT forward weights really being NVFP4 values.
#include <gtest/gtest.h>

#include "io/quantize_model.h"
#include "model_test_util.h"
#include "quant/nvfp4_fixed_scale.h"
#include "quant/tensor_amax.h"

namespace nvfp4lm::test::test_qwen3_qat_modes {
namespace {

// Rows 0, step, 2*step, ... of a [rows, cols] tensor.
Tensor sample_rows(const Tensor& t, int64_t step) {
  const int64_t rows = (t.dim(0) + step - 1) / step, cols = t.dim(1);
  Tensor out = Tensor::empty({rows, cols}, DType::F32);
  for (int64_t r = 0; r < rows; ++r) out.narrow(0, r, 1).copy_from(t.narrow(0, r * step, 1));
  return out;
}

void check_mode(const std::string& prefix, bool tied, QatMode qat, bool quantize_lm_head) {
  const auto ref = SafetensorsFile::open(source_path("tests/model/fixtures/qat_modes.safetensors"));
  TrainModelOptions options;
  options.qat = qat;
  options.quantize_lm_head = quantize_lm_head;
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(tied), options);
  const TrainBatch batch = Reference(tied).batch(false);
  const LossStats stats = model.forward_backward(batch, 1.0f / static_cast<float>(count_loss_tokens(batch)));
  const double ref_loss = ref->tensor(prefix + "loss").data<float>()[0];
  EXPECT_NEAR(stats.mean(), ref_loss, 1e-5 * ref_loss) << prefix << " loss";
  int checked = 0;
  for (const Parameter& p : model.parameters()) {
    const SafetensorsEntry* entry = ref->find(prefix + "grad." + p.name);
    if (entry == nullptr) continue;
    const bool vocab_rows = p.name == "model.embed_tokens.weight" || p.name == "lm_head.weight";
    const Tensor grad = p.grad.rank() == 2 ? sample_rows(p.grad, vocab_rows ? 16 : 8) : p.grad;
    expect_rel_close(grad, ref->tensor(*entry), 1e-4, prefix + " grad of " + p.name);
    ++checked;
  }
  EXPECT_EQ(checked, tied ? 5 : 6) << prefix;
}

TEST(Qwen3QatModes, W4A4) { check_mode("w4a4.", false, QatMode::W4A4, false); }
TEST(Qwen3QatModes, W4A4QuantizedTiedHead) { check_mode("w4a4_head.", true, QatMode::W4A4, true); }
TEST(Qwen3QatModes, W4A16QuantizedHead) { check_mode("w4a16_head.", false, QatMode::W4A16, true); }

// Every QAT forward weight is an NVFP4 value of its group's tensor scale: requantizing it with that scale
// reproduces it exactly, and q/k/v share the scale of their joint amax.
TEST(Qwen3QatModes, ForwardWeightsAreNvfp4WithSharedScales) {
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{});
  const Qwen3Model inference = model.inference_model();
  const Qwen3LayerWeights& layer = inference.weights().layers[1];
  std::map<std::string, Tensor> masters;
  for (const NamedTensor& t : model.master_weights()) masters[t.name] = t.tensor;
  const std::string p = "model.layers.1.self_attn.";
  float amax = 0;
  for (const char* n : {"q_proj", "k_proj", "v_proj"})
    amax = std::max(amax, tensor_amax(masters[p + n + ".weight"], n));
  Nvfp4QuantOptions shared;
  shared.tensor_scale = nvfp4_tensor_scale(amax);
  for (const auto& [name, used] : {std::pair<const char*, Tensor>{"q_proj", layer.q_proj.dense},
                                   {"k_proj", layer.k_proj.dense},
                                   {"v_proj", layer.v_proj.dense}}) {
    Tensor expected = Tensor::empty(used.shape(), DType::F32);
    fake_quantize_nvfp4(masters[p + name + ".weight"], expected, shared);
    EXPECT_EQ(to_float_vector(used), to_float_vector(expected)) << name;
  }
  // The lm_head stays unquantized by default: the forward uses the master itself.
  EXPECT_EQ(to_float_vector(inference.weights().lm_head.dense), to_float_vector(masters["lm_head.weight"]));
}

// An NVFP4 model as the starting point: the masters are its dequantized weights, so without QAT the trainable
// model computes what the packed inference model computes.
TEST(Qwen3QatModes, MastersFromAnNvfp4Model) {
  TempDir dir;
  QuantizeOptions quantize;
  quantize.format = ModelFormat::ModeloptNvfp4;
  quantize_model(*open_tiny(false), dir / "nvfp4", quantize);
  const auto files = open_model(dir / "nvfp4");
  TrainModelOptions options;
  options.qat = QatMode::Off;
  Qwen3Trainable model = Qwen3Trainable::from_files(*files, options);
  const std::string name = "model.layers.0.mlp.up_proj.weight";
  for (const NamedTensor& t : model.master_weights()) {
    if (t.name != name) continue;
    EXPECT_EQ(to_float_vector(t.tensor), to_float_vector(dequantize_nvfp4(files->load(name).nvfp4, DType::F32)));
  }
  const Qwen3Model packed = Qwen3Model::from_files(*files);
  const Reference ref(false);
  expect_rel_close(model.inference_model().forward(ref.get("input_ids")), packed.forward(ref.get("input_ids")), 1e-5,
                   "trainable from NVFP4 vs packed model");
  // QAT on top reproduces the exported model's forward (the "qat." reference logits): requantizing NVFP4 values
  // is (nearly) idempotent even though the group amax, hence the tensor scale, may move slightly.
  options.qat = QatMode::W4A16;
  Qwen3Trainable qat = Qwen3Trainable::from_files(*files, options);
  expect_rel_close(qat.inference_model().forward(ref.get("input_ids")), ref.get("qat.logits"), 1e-4,
                   "QAT from NVFP4 masters");
}

TEST(Qwen3QatModes, Bf16MastersTrainCloseToFp32) {
  const Reference ref(false);
  TrainModelOptions options;
  options.qat = QatMode::Off;
  options.bf16_master = true;
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), options);
  for (const Parameter& p : model.parameters()) {
    ASSERT_EQ(p.value.dtype(), DType::BF16) << p.name;
    ASSERT_EQ(p.grad.dtype(), DType::F32) << p.name;
  }
  const TrainBatch batch = ref.batch(false);
  const LossStats stats = model.forward_backward(batch, 1.0f / static_cast<float>(count_loss_tokens(batch)));
  const double ref_loss = ref.get("loss").data<float>()[0];
  EXPECT_NEAR(stats.mean(), ref_loss, 1e-2 * ref_loss);  // bf16 rounding of the weights only
  EXPECT_NE(stats.mean(), ref_loss);
  for (const Parameter& p : model.parameters())
    EXPECT_LT(rel_error(p.grad, ref.get("grad." + p.name)).rel(), 5e-2) << p.name;
}

TEST(Qwen3QatModes, RejectsBadOptionsAndBatches) {
  EXPECT_THROW(parse_qat_mode("w8a8"), Error);
  EXPECT_EQ(parse_qat_mode("w4a4"), QatMode::W4A4);
  EXPECT_EQ(parse_loss_kind("l1"), LossKind::L1);
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  TrainBatch batch = Reference(false).batch(false);
  batch.targets = Tensor::from_ints(std::vector<int32_t>(24, 513), {2, 12});  // outside the vocabulary
  EXPECT_THROW(model.forward_backward(batch, 1.0f), Error);
  EXPECT_THROW(model.evaluate(batch, LossKind::L1), Error);
  batch.targets = Tensor::from_ints(std::vector<int32_t>(12, 1), {1, 12});  // wrong shape
  EXPECT_THROW(model.evaluate(batch), Error);
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_qat_modes
