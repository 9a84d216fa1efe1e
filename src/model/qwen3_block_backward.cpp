// Backward of one training decoder block (see qwen3_block.h), the forward's steps in reverse:
//   MLP:  d_act = d_out · Wdown; dWdown += d_outᵀ · A(act); swiglu backward -> d_gate, d_up;
//         d_h2 = d_gate · Wgate + d_up · Wup; dWgate/dWup += d_gate/d_upᵀ · A(h2); rmsnorm backward;
//         d_x_mid = d_out + d_x_mid(norm)
//   attention: d_attn = d_x_mid · Wo; dWo += d_x_midᵀ · A(attn); attention backward -> dq, dk, dv;
//         inverse RoPE on dq, dk; QK-norm backward; d_h = dq · Wq + dk · Wk + dv · Wv; dWq/k/v += ...ᵀ · A(h);
//         rmsnorm backward; d_x_in = d_x_mid + d_x_in(norm)
// Straight-through estimator: the W's are the forward weights (deq(Q(W)) under QAT) and gradients pass through
// the activation quantizer A unchanged; parameter gradients land in the masters' F32 grads (+=).
// LoRA: a frozen linear's adapter adds its part of the input gradient right after the base's (so a q/k/v sum takes
// the same order on every device) and accumulates its own gradients; frozen weights get none, and a frozen norm's
// weight gradient goes to a discarded buffer (the input gradient still flows through the norm).
#include <cmath>

#include "model/qwen3_block.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/rmsnorm.h"
#include "ops/swiglu.h"

namespace nvfp4lm::detail {
namespace {

// dx (= or += when accumulate) dy · W, then the adapter's part of it.
void input_grad(TrainTensor& w, const BlockContext& context, const Tensor& dy, const Tensor& x, Tensor& dx,
                bool accumulate = false) {
  linear_backward_input(dy, w.use, dx, accumulate);
  if (w.lora) lora_backward(*w.lora, x, dy, dx, context.lora);
}

void weight_grad(TrainTensor& w, const Tensor& dy, const Tensor& x) {
  if (w.trainable()) linear_backward_weight(dy, x, w.grad);
}

}  // namespace

Tensor& norm_weight_grad(TrainTensor& norm, Tensor& discarded) { return norm.trainable() ? norm.grad : discarded; }

BlockGradBuffers::BlockGradBuffers(const Qwen3Config& c, int64_t batch, int64_t tokens, DType dtype, Device device) {
  d_normed = Tensor::empty({batch, tokens, c.hidden_size}, dtype, device);
  d_q = Tensor::empty({batch, tokens, c.num_attention_heads, c.head_dim}, dtype, device);
  d_k = Tensor::empty({batch, tokens, c.num_key_value_heads, c.head_dim}, dtype, device);
  d_v = Tensor::empty({batch, tokens, c.num_key_value_heads, c.head_dim}, dtype, device);
  d_attn = Tensor::empty({batch, tokens, c.num_attention_heads, c.head_dim}, dtype, device);
  d_gate = Tensor::empty({batch, tokens, c.intermediate_size}, dtype, device);
  d_up = Tensor::empty({batch, tokens, c.intermediate_size}, dtype, device);
  d_act = Tensor::empty({batch, tokens, c.intermediate_size}, dtype, device);
  discarded_hidden_norm_grad = Tensor::zeros({c.hidden_size}, DType::F32, device);
  discarded_head_norm_grad = Tensor::zeros({c.head_dim}, DType::F32, device);
}

void block_backward(TrainLayer& w, const BlockContext& context, const BlockActivations& a, BlockGradBuffers& g,
                    Tensor& d_resid) {
  const Qwen3Config& c = *context.config;
  const Tensor d_out = token_rows(d_resid);

  // MLP half.
  Tensor d_act = token_rows(g.d_act);
  const Tensor down_in = token_rows(a.down_input);
  input_grad(w.down_proj, context, d_out, down_in, d_act);
  weight_grad(w.down_proj, d_out, down_in);
  swiglu_backward(g.d_act, a.gate, a.up, g.d_gate, g.d_up);
  const Tensor d_gate = token_rows(g.d_gate), d_up = token_rows(g.d_up);
  Tensor d_normed = token_rows(g.d_normed);
  const Tensor gate_up_in = token_rows(a.gate_up_input);
  input_grad(w.gate_proj, context, d_gate, gate_up_in, d_normed);
  input_grad(w.up_proj, context, d_up, gate_up_in, d_normed, /*accumulate=*/true);
  weight_grad(w.gate_proj, d_gate, gate_up_in);
  weight_grad(w.up_proj, d_up, gate_up_in);
  rmsnorm_backward(g.d_normed, a.x_mid, w.post_attention_norm.use, a.rstd_mid, g.d_normed,
                   norm_weight_grad(w.post_attention_norm, g.discarded_hidden_norm_grad));
  add_inplace(d_resid, g.d_normed);  // now dL/d x_mid

  // Attention half.
  Tensor d_attn = token_rows(g.d_attn);
  const Tensor o_in = token_rows(a.o_input);
  input_grad(w.o_proj, context, d_out, o_in, d_attn);
  weight_grad(w.o_proj, d_out, o_in);
  AttentionOptions options;
  options.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  options.segment_ids = context.segment_ids;
  attention_backward(g.d_attn, a.q, a.k, a.v, a.attn, a.lse, options, g.d_q, g.d_k, g.d_v);
  rope_backward(g.d_q, *context.positions, *context.rope);
  rope_backward(g.d_k, *context.positions, *context.rope);
  rmsnorm_backward(g.d_q, a.q_raw, w.q_norm.use, a.rstd_q, g.d_q,
                   norm_weight_grad(w.q_norm, g.discarded_head_norm_grad));
  rmsnorm_backward(g.d_k, a.k_raw, w.k_norm.use, a.rstd_k, g.d_k,
                   norm_weight_grad(w.k_norm, g.discarded_head_norm_grad));
  const Tensor d_q = token_rows(g.d_q), d_k = token_rows(g.d_k), d_v = token_rows(g.d_v);
  const Tensor qkv_in = token_rows(a.qkv_input);
  input_grad(w.q_proj, context, d_q, qkv_in, d_normed);
  input_grad(w.k_proj, context, d_k, qkv_in, d_normed, /*accumulate=*/true);
  input_grad(w.v_proj, context, d_v, qkv_in, d_normed, /*accumulate=*/true);
  weight_grad(w.q_proj, d_q, qkv_in);
  weight_grad(w.k_proj, d_k, qkv_in);
  weight_grad(w.v_proj, d_v, qkv_in);
  rmsnorm_backward(g.d_normed, a.x_in, w.input_norm.use, a.rstd_in, g.d_normed,
                   norm_weight_grad(w.input_norm, g.discarded_hidden_norm_grad));
  add_inplace(d_resid, g.d_normed);  // now dL/d x_in
}

}  // namespace nvfp4lm::detail
