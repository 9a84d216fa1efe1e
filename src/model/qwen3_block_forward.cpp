// Forward of one training decoder block (see qwen3_block.h for the math and what is saved).
#include <cmath>

#include "model/qwen3_block.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/nvfp4_w4a4_linear.h"
#include "ops/rmsnorm.h"
#include "ops/swiglu.h"
#include "quant/nvfp4.h"
#include "quant/tensor_amax.h"

namespace nvfp4lm::detail {
namespace {

// x_q = fake-quantized x (W4A4 activations: 1x16 blocks along the features, tensor scale from x's amax), what the
// backward reads. With native W4A4 the packed form is returned too (x_q = its values, the same bits as the fake
// quantization: quant/nvfp4.h), for the FP4 tensor-core GEMM; otherwise an undefined one.
Nvfp4Tensor quantize_activation(const BlockContext& context, const Tensor& x, Tensor& x_q, const char* what) {
  Tensor out = token_rows(x_q);
  if (!context.native_w4a4) {
    fake_quantize_nvfp4(token_rows(x), out, Nvfp4QuantOptions{}, what);
    return {};
  }
  Nvfp4Tensor packed = quantize_nvfp4(token_rows(x), Nvfp4QuantOptions{}, what);
  dequantize_nvfp4(packed, out);
  return packed;
}

}  // namespace

void record_input_amax(ActivationCalibration& calibration, const Tensor& input,
                       std::initializer_list<const std::string*> weight_names) {
  const std::string& first = **weight_names.begin();
  const float amax = tensor_amax(token_rows(input), "the input activation of " + first);
  for (const std::string* name : weight_names) calibration.observe(*name, amax);
}

void project(const TrainTensor& w, const BlockContext& context, const Tensor& x, Tensor& y,
             const Nvfp4Tensor* x_packed) {
  if (x_packed != nullptr && x_packed->defined() && w.packed.defined()) {
    nvfp4_w4a4_linear_forward(*x_packed, w.packed, y);
  } else {
    linear_forward(x, w.use, y);
  }
  if (w.lora) lora_forward(*w.lora, x, y, context.lora);
}

Tensor token_rows(const Tensor& t) {
  const int64_t rows = t.dim(0) * t.dim(1);
  return t.reshape({rows, rows == 0 ? 0 : t.numel() / rows});
}

BlockActivations make_block_activations(const Qwen3Config& c, const Tensor& x_in, bool saved,
                                        bool quantize_activations) {
  const int64_t batch = x_in.dim(0), tokens = x_in.dim(1), rows = batch * tokens;
  const DType dtype = x_in.dtype();
  const Device device = x_in.device();
  auto make = [&](std::initializer_list<int64_t> tail) {
    std::vector<int64_t> dims{batch, tokens};
    dims.insert(dims.end(), tail);
    return Tensor::empty(Shape(dims), dtype, device);
  };
  BlockActivations a;
  a.x_in = x_in;
  a.normed_in = make({c.hidden_size});
  a.q_raw = make({c.num_attention_heads, c.head_dim});
  a.k_raw = make({c.num_key_value_heads, c.head_dim});
  a.q = make({c.num_attention_heads, c.head_dim});
  a.k = make({c.num_key_value_heads, c.head_dim});
  a.v = make({c.num_key_value_heads, c.head_dim});
  a.attn = make({c.num_attention_heads, c.head_dim});
  a.x_mid = saved ? make({c.hidden_size}) : x_in;
  a.normed_mid = make({c.hidden_size});
  a.gate = make({c.intermediate_size});
  a.up = make({c.intermediate_size});
  a.act = make({c.intermediate_size});
  a.rstd_in = Tensor::empty({rows}, DType::F32, device);
  a.rstd_q = Tensor::empty({rows * c.num_attention_heads}, DType::F32, device);
  a.rstd_k = Tensor::empty({rows * c.num_key_value_heads}, DType::F32, device);
  a.rstd_mid = Tensor::empty({rows}, DType::F32, device);
  a.lse = Tensor::empty({batch, c.num_attention_heads, tokens}, DType::F32, device);
  if (quantize_activations) {
    a.qkv_input = make({c.hidden_size});
    a.o_input = make({c.num_attention_heads, c.head_dim});
    a.gate_up_input = make({c.hidden_size});
    a.down_input = make({c.intermediate_size});
  } else {
    a.qkv_input = a.normed_in;
    a.o_input = a.attn;
    a.gate_up_input = a.normed_mid;
    a.down_input = a.act;
  }
  return a;
}

void block_forward(const TrainLayer& w, const BlockContext& context, BlockActivations& a, Tensor& out) {
  const Qwen3Config& c = *context.config;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const bool w4a4 = context.quantize_activations;

  // Attention half.
  rmsnorm_forward(a.x_in, w.input_norm.use, eps, a.normed_in, &a.rstd_in);
  if (context.calibration)
    record_input_amax(*context.calibration, a.normed_in, {&w.q_proj.name, &w.k_proj.name, &w.v_proj.name});
  Nvfp4Tensor packed;  // the current linears' input in NVFP4 (native W4A4 only)
  if (w4a4) packed = quantize_activation(context, a.normed_in, a.qkv_input, "W4A4 activation (q/k/v input)");
  const Tensor qkv_in = token_rows(a.qkv_input);
  Tensor q_rows = token_rows(a.q_raw), k_rows = token_rows(a.k_raw), v_rows = token_rows(a.v);
  project(w.q_proj, context, qkv_in, q_rows, &packed);
  project(w.k_proj, context, qkv_in, k_rows, &packed);
  project(w.v_proj, context, qkv_in, v_rows, &packed);
  rmsnorm_forward(a.q_raw, w.q_norm.use, eps, a.q, &a.rstd_q);
  rmsnorm_forward(a.k_raw, w.k_norm.use, eps, a.k, &a.rstd_k);
  rope_forward(a.q, *context.positions, *context.rope);
  rope_forward(a.k, *context.positions, *context.rope);
  AttentionOptions options;
  options.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  options.segment_ids = context.segment_ids;
  attention_forward(a.q, a.k, a.v, a.attn, options, &a.lse);
  if (context.calibration) record_input_amax(*context.calibration, a.attn, {&w.o_proj.name});
  if (w4a4) packed = quantize_activation(context, a.attn, a.o_input, "W4A4 activation (o_proj input)");
  Tensor proj = token_rows(a.normed_mid);  // free until the second norm: holds the o_proj output
  project(w.o_proj, context, token_rows(a.o_input), proj, &packed);
  add(a.x_in, a.normed_mid, a.x_mid);

  // MLP half.
  rmsnorm_forward(a.x_mid, w.post_attention_norm.use, eps, a.normed_mid, &a.rstd_mid);
  if (context.calibration) record_input_amax(*context.calibration, a.normed_mid, {&w.gate_proj.name, &w.up_proj.name});
  if (w4a4) packed = quantize_activation(context, a.normed_mid, a.gate_up_input, "W4A4 activation (gate/up input)");
  const Tensor gate_up_in = token_rows(a.gate_up_input);
  Tensor gate_rows = token_rows(a.gate), up_rows = token_rows(a.up);
  project(w.gate_proj, context, gate_up_in, gate_rows, &packed);
  project(w.up_proj, context, gate_up_in, up_rows, &packed);
  swiglu_forward(a.gate, a.up, a.act);
  if (context.calibration) record_input_amax(*context.calibration, a.act, {&w.down_proj.name});
  if (w4a4) packed = quantize_activation(context, a.act, a.down_input, "W4A4 activation (down_proj input)");
  if (out.raw() == a.x_mid.raw()) {
    // In place (activations not saved): the MLP output needs a buffer of its own; normed_in is free by now.
    Tensor mlp = token_rows(a.normed_in);
    project(w.down_proj, context, token_rows(a.down_input), mlp, &packed);
    add_inplace(out, a.normed_in);
  } else {
    Tensor out_rows = token_rows(out);
    project(w.down_proj, context, token_rows(a.down_input), out_rows, &packed);
    add_inplace(out, a.x_mid);
  }
}

}  // namespace nvfp4lm::detail
