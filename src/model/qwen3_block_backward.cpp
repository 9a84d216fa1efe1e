// Backward of one training decoder block (see qwen3_block.h), the forward's steps in reverse:
//   MLP:  d_act = d_out · Wdown; dWdown += d_outᵀ · A(act); swiglu backward -> d_gate, d_up;
//         d_h2 = d_gate · Wgate + d_up · Wup; dWgate/dWup += d_gate/d_upᵀ · A(h2); rmsnorm backward;
//         d_x_mid = d_out + d_x_mid(norm)
//   attention: d_attn = d_x_mid · Wo; dWo += d_x_midᵀ · A(attn); attention backward -> dq, dk, dv;
//         inverse RoPE on dq, dk; QK-norm backward; d_h = dq · Wq + dk · Wk + dv · Wv; dWq/k/v += ...ᵀ · A(h);
//         rmsnorm backward; d_x_in = d_x_mid + d_x_in(norm)
// Straight-through estimator: the W's are the forward weights (deq(Q(W)) under QAT) and gradients pass through
// the activation quantizer A unchanged; parameter gradients land in the masters' F32 grads (+=).
#include <cmath>

#include "model/qwen3_block.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/rmsnorm.h"
#include "ops/swiglu.h"

namespace nvfp4lm::detail {

BlockGradBuffers::BlockGradBuffers(const Qwen3Config& c, int64_t batch, int64_t tokens, DType dtype, Device device) {
  d_normed = Tensor::empty({batch, tokens, c.hidden_size}, dtype, device);
  d_q = Tensor::empty({batch, tokens, c.num_attention_heads, c.head_dim}, dtype, device);
  d_k = Tensor::empty({batch, tokens, c.num_key_value_heads, c.head_dim}, dtype, device);
  d_v = Tensor::empty({batch, tokens, c.num_key_value_heads, c.head_dim}, dtype, device);
  d_attn = Tensor::empty({batch, tokens, c.num_attention_heads, c.head_dim}, dtype, device);
  d_gate = Tensor::empty({batch, tokens, c.intermediate_size}, dtype, device);
  d_up = Tensor::empty({batch, tokens, c.intermediate_size}, dtype, device);
  d_act = Tensor::empty({batch, tokens, c.intermediate_size}, dtype, device);
}

void block_backward(TrainLayer& w, const BlockContext& context, const BlockActivations& a, BlockGradBuffers& g,
                    Tensor& d_resid) {
  const Qwen3Config& c = *context.config;
  const Tensor d_out = token_rows(d_resid);

  // MLP half.
  Tensor d_act = token_rows(g.d_act);
  linear_backward_input(d_out, w.down_proj.use, d_act);
  linear_backward_weight(d_out, token_rows(a.down_input), w.down_proj.grad);
  swiglu_backward(g.d_act, a.gate, a.up, g.d_gate, g.d_up);
  const Tensor d_gate = token_rows(g.d_gate), d_up = token_rows(g.d_up);
  Tensor d_normed = token_rows(g.d_normed);
  linear_backward_input(d_gate, w.gate_proj.use, d_normed);
  linear_backward_input(d_up, w.up_proj.use, d_normed, /*accumulate=*/true);
  const Tensor gate_up_in = token_rows(a.gate_up_input);
  linear_backward_weight(d_gate, gate_up_in, w.gate_proj.grad);
  linear_backward_weight(d_up, gate_up_in, w.up_proj.grad);
  rmsnorm_backward(g.d_normed, a.x_mid, w.post_attention_norm.use, a.rstd_mid, g.d_normed, w.post_attention_norm.grad);
  add_inplace(d_resid, g.d_normed);  // now dL/d x_mid

  // Attention half.
  Tensor d_attn = token_rows(g.d_attn);
  linear_backward_input(d_out, w.o_proj.use, d_attn);
  linear_backward_weight(d_out, token_rows(a.o_input), w.o_proj.grad);
  AttentionOptions options;
  options.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  options.segment_ids = context.segment_ids;
  attention_backward(g.d_attn, a.q, a.k, a.v, a.attn, a.lse, options, g.d_q, g.d_k, g.d_v);
  rope_backward(g.d_q, *context.positions, *context.rope);
  rope_backward(g.d_k, *context.positions, *context.rope);
  rmsnorm_backward(g.d_q, a.q_raw, w.q_norm.use, a.rstd_q, g.d_q, w.q_norm.grad);
  rmsnorm_backward(g.d_k, a.k_raw, w.k_norm.use, a.rstd_k, g.d_k, w.k_norm.grad);
  const Tensor d_q = token_rows(g.d_q), d_k = token_rows(g.d_k), d_v = token_rows(g.d_v);
  linear_backward_input(d_q, w.q_proj.use, d_normed);
  linear_backward_input(d_k, w.k_proj.use, d_normed, /*accumulate=*/true);
  linear_backward_input(d_v, w.v_proj.use, d_normed, /*accumulate=*/true);
  const Tensor qkv_in = token_rows(a.qkv_input);
  linear_backward_weight(d_q, qkv_in, w.q_proj.grad);
  linear_backward_weight(d_k, qkv_in, w.k_proj.grad);
  linear_backward_weight(d_v, qkv_in, w.v_proj.grad);
  rmsnorm_backward(g.d_normed, a.x_in, w.input_norm.use, a.rstd_in, g.d_normed, w.input_norm.grad);
  add_inplace(d_resid, g.d_normed);  // now dL/d x_in
}

}  // namespace nvfp4lm::detail
