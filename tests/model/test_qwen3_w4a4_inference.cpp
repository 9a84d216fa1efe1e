// W4A4 inference of a calibrated checkpoint (ModelOpt quant_algo NVFP4, an input_scale on every projection) on the CPU:
//  - the model runs each projection's input quantized to NVFP4 with its input_scale: its logits equal a forward written
//    out here with the CPU ops over the dequantized weights, each projection's input passed through the element-by-
//    element statement of the quantization rule (nvfp4_test_util.h) with that fixed scale;
//  - the compute path and precision say W4A4; `w4a4_activations = false` runs the same weights W4A16 (other logits,
//    no W4A4 in the description), as does a weight-only export;
//  - prefill + decode steps through a KV cache give the full forward's logits, and the fast CPU kernels run it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/model_test_util.h"
#include "model/qwen3_model.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"
#include "quant/nvfp4_test_util.h"

namespace nvfp4lm::test::test_qwen3_w4a4_inference {
namespace {

constexpr float kAmax = 2.0f;
const float kInputScale = kAmax / (6.0f * 448.0f);

Tensor dense_weight(const ModelFiles& files, const std::string& name) {
  const ModelWeight weight = files.load(name);
  return weight.is_nvfp4() ? dequantize_nvfp4(weight.nvfp4, DType::F32) : weight.dense.contiguous();
}

// x [rows, in] -> its values after NVFP4 quantization with the fixed scale (the rule, element by element).
Tensor fake_quantized(const Tensor& x) {
  const Tensor c = x.contiguous();
  const std::vector<float> values(c.data<float>(), c.data<float>() + c.numel());
  const ReferenceQuant q = reference_quantize(values, c.numel() / c.dim(-1), c.dim(-1), false, false, 0, kInputScale);
  Tensor out = Tensor::empty(c.shape(), DType::F32);
  std::copy(q.values.begin(), q.values.end(), out.data<float>());
  return out;
}

// y = Q(x) · Wᵀ
void w4a4_linear(const ModelFiles& files, const std::string& name, const Tensor& x, Tensor& y) {
  linear_forward(fake_quantized(x), dense_weight(files, name), y);
}

// Logits [1, n, V] of one sequence: the forward written out with the CPU ops, every projection W4A4.
Tensor written_out_forward(const ModelFiles& files, const std::vector<int32_t>& ids) {
  const Qwen3Config& c = files.config();
  const int64_t n = static_cast<int64_t>(ids.size()), h = c.hidden_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  std::vector<int32_t> position_values(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) position_values[i] = static_cast<int32_t>(i);
  const Tensor positions = Tensor::from_ints(position_values, Shape{1, n});
  const RopeTable rope(c.head_dim, static_cast<float>(c.rope_theta), n);
  Tensor x = Tensor::empty({1, n, h}, DType::F32);
  embedding_forward(Tensor::from_ints(ids, Shape{1, n}), dense_weight(files, "model.embed_tokens.weight"), x);
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = fmt::format("model.layers.{}.", layer);
    Tensor normed = Tensor::empty({1, n, h}, DType::F32);
    rmsnorm_forward(x, dense_weight(files, p + "input_layernorm.weight"), eps, normed);
    Tensor q = Tensor::empty({1, n, c.num_attention_heads, c.head_dim}, DType::F32);
    Tensor k = Tensor::empty({1, n, c.num_key_value_heads, c.head_dim}, DType::F32);
    Tensor v = Tensor::empty({1, n, c.num_key_value_heads, c.head_dim}, DType::F32);
    Tensor q_rows = q.reshape({n, c.q_dim()}), k_rows = k.reshape({n, c.kv_dim()}), v_rows = v.reshape({n, c.kv_dim()});
    w4a4_linear(files, p + "self_attn.q_proj.weight", normed.reshape({n, h}), q_rows);
    w4a4_linear(files, p + "self_attn.k_proj.weight", normed.reshape({n, h}), k_rows);
    w4a4_linear(files, p + "self_attn.v_proj.weight", normed.reshape({n, h}), v_rows);
    rmsnorm_forward(q, dense_weight(files, p + "self_attn.q_norm.weight"), eps, q);
    rmsnorm_forward(k, dense_weight(files, p + "self_attn.k_norm.weight"), eps, k);
    rope_forward(q, positions, rope);
    rope_forward(k, positions, rope);
    Tensor attn = Tensor::empty(q.shape(), DType::F32);
    AttentionOptions options;
    options.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    attention_forward(q, k, v, attn, options);
    Tensor proj = Tensor::empty({n, h}, DType::F32);
    w4a4_linear(files, p + "self_attn.o_proj.weight", attn.reshape({n, c.q_dim()}), proj);
    add_inplace(x, proj.reshape({1, n, h}));
    rmsnorm_forward(x, dense_weight(files, p + "post_attention_layernorm.weight"), eps, normed);
    Tensor gate = Tensor::empty({n, c.intermediate_size}, DType::F32), up = gate.clone(), act = gate.clone();
    w4a4_linear(files, p + "mlp.gate_proj.weight", normed.reshape({n, h}), gate);
    w4a4_linear(files, p + "mlp.up_proj.weight", normed.reshape({n, h}), up);
    swiglu_forward(gate, up, act);
    w4a4_linear(files, p + "mlp.down_proj.weight", act, proj);
    add_inplace(x, proj.reshape({1, n, h}));
  }
  Tensor hidden = Tensor::empty({n, h}, DType::F32);
  rmsnorm_forward(x.reshape({n, h}), dense_weight(files, "model.norm.weight"), eps, hidden);
  const std::string head = c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  Tensor logits = Tensor::empty({n, c.vocab_size}, DType::F32);
  linear_forward(hidden, dense_weight(files, head), logits);
  return logits.reshape({1, n, c.vocab_size});
}

std::vector<int32_t> first_row(const Tensor& ids) {
  return std::vector<int32_t>(ids.data<int32_t>(), ids.data<int32_t>() + ids.dim(1));
}

TEST(Qwen3W4a4, ACalibratedCheckpointQuantizesEveryProjectionsInputWithItsInputScale) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    TempDir dir;
    const fs::path path = quantize_tiny_w4a4(dir, tied, kAmax);
    const std::unique_ptr<ModelFiles> files = open_model(path);
    const Qwen3Model model = Qwen3Model::from_files(*files, ModelOptions{});
    EXPECT_NE(model.compute_path().find("W4A4"), std::string::npos) << model.compute_path();
    EXPECT_NE(model.precision().find("W4A4"), std::string::npos) << model.precision();
    for (const Qwen3LayerWeights& layer : model.weights().layers)
      for (const LinearWeight* linear : {&layer.q_proj, &layer.k_proj, &layer.v_proj, &layer.o_proj, &layer.gate_proj,
                                         &layer.up_proj, &layer.down_proj})
        EXPECT_EQ(linear->input_scale, kInputScale);
    EXPECT_FALSE(model.weights().lm_head.is_w4a4());

    const Tensor ids = Reference(tied).get("input_ids").narrow(0, 0, 1).contiguous();
    const Tensor logits = model.forward(ids);
    expect_rel_close(logits, written_out_forward(*files, first_row(ids)), 1e-5,
                     "W4A4 logits vs the written-out forward");

    // The same weights W4A16: other logits (the activations' quantization shows), a description without W4A4.
    ModelOptions w4a16;
    w4a16.w4a4_activations = false;
    const Qwen3Model off = Qwen3Model::from_files(*files, w4a16);
    EXPECT_EQ(off.compute_path().find("W4A4"), std::string::npos) << off.compute_path();
    EXPECT_EQ(off.weights().w4a4_max_in_features(), 0);
    EXPECT_GT(rel_error(off.forward(ids), logits).rel(), 1e-3);
    // A weight-only export of the same model is W4A16 and equals the W4A16 run (the same codes and scales).
    const Qwen3Model weight_only = Qwen3Model::load(quantize_tiny_modelopt(dir, tied));
    EXPECT_EQ(weight_only.compute_path().find("W4A4"), std::string::npos);
    expect_rel_close(weight_only.forward(ids), off.forward(ids), 1e-7, "weight-only vs --w4a4 off");
  }
}

TEST(Qwen3W4a4, CachedDecodingAndTheFastCpuKernelsFollowTheFullForward) {
  TempDir dir;
  const fs::path path = quantize_tiny_w4a4(dir, false, kAmax);
  const Tensor ids = Reference(false).get("input_ids");
  const Qwen3Model reference = Qwen3Model::load(path);
  const Tensor full = reference.forward(ids);
  for (CpuMatmul matmul : {CpuMatmul::Fp32, CpuMatmul::Bf16Activations, CpuMatmul::Int8Activations}) {
    SCOPED_TRACE(cpu_matmul_name(matmul));
    ModelOptions options;
    options.cpu_matmul = matmul;
    const Qwen3Model model = Qwen3Model::load(path, options);
    EXPECT_NE(model.compute_path().find("W4A4"), std::string::npos) << model.compute_path();
    const int64_t batch = ids.dim(0), tokens = ids.dim(1), prefill = 4;
    KVCache cache = model.make_cache(batch, tokens);
    // The layers' products in another order (fp32 rounding only): W4A4 values are exact in BF16, so the BF16 kernels
    // multiply them exactly, and the int8 decode kernels hand W4A4 linears to the BF16 ones. Under int8 the lm_head
    // (not W4A4) has int8 activations: its own bound (ops/cpu_matmul.h), which feeds nothing back.
    const double bound = matmul == CpuMatmul::Int8Activations ? 3e-2 : 1e-5;
    expect_rel_close(model.forward_cached(ids.narrow(1, 0, prefill).contiguous(), cache),
                     full.select(1, prefill - 1).contiguous(), bound, "prefill's last logits");
    for (int64_t t = prefill; t < tokens; ++t)
      expect_rel_close(model.forward_cached(ids.narrow(1, t, 1).contiguous(), cache), full.select(1, t).contiguous(),
                       bound, "decode step " + std::to_string(t));
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_w4a4_inference
