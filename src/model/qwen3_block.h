// One Qwen3 decoder block for training (internal to model/): the forward that saves what the backward needs, and
// the hand-written backward, in the order of the math (DESIGN.md §3):
//   h   = rmsnorm(x_in)                         [rstd_in]
//   q/k/v = A(h) · Wq/Wk/Wvᵀ                    A = identity, or NVFP4 fake-quant of the activation under W4A4
//   q, k = rope(rmsnorm_head(q)), rope(rmsnorm_head(k))     [q_raw, k_raw, rstd_q, rstd_k]
//   attn = attention(q, k, v)                   [lse]
//   x_mid = x_in + A(attn) · Woᵀ
//   h2  = rmsnorm(x_mid)                        [rstd_mid]
//   act = silu(A(h2) · Wgateᵀ) * (A(h2) · Wupᵀ)
//   out = x_mid + A(act) · Wdownᵀ
// The W's are the weights the forward uses (TrainTensor::use: deq(Q(master)) under QAT); gradients follow the
// straight-through estimator through both quantizers. Tensors are [B, T, ...] contiguous in the compute dtype.
//
// Re-running block_forward from a saved x_in reproduces every saved tensor, which is the hook for a
// recompute-per-block mode (save x_in only, re-run before each block's backward).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "io/activation_calibration.h"
#include "io/hf_config.h"
#include "model/lora.h"
#include "ops/rope.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::detail {

// A parameter as the model uses it.
struct TrainTensor {
  std::string name;
  Tensor master;           // F32 or BF16 master weight (Parameter::value)
  Tensor grad;             // F32, accumulated; undefined when frozen
  Tensor use;              // what the forward reads: `master` itself, or a copy refreshed from it
  bool quantized = false;  // use = deq(Q(master)) (the STE's forward weight)
  // packed_weights: `packed` holds Q(master) and `use` is a scratch shared by all blocks, filled from it per block.
  bool keep_packed = false;
  // Native W4A4 (Blackwell SM 12.x, ops/nvfp4_w4a4_linear.h) also fills `packed` with Q(master) while `use` keeps its
  // values for the backward: the forward multiplies `packed` with the quantized activations on the FP4 tensor cores.
  Nvfp4Tensor packed;
  // LoRA (model/lora.h): an adapter over this frozen linear; the forward adds its low-rank term to the base's.
  std::optional<LoraAdapter> lora;
  bool trainable() const { return grad.defined(); }
};

struct TrainLayer {
  TrainTensor input_norm, q_proj, k_proj, v_proj, q_norm, k_norm, o_proj, post_attention_norm, gate_proj, up_proj,
      down_proj;
  // Something in the block trains: its own weights, or (LoRA) an adapter over one of its linears.
  bool trainable() const {
    return input_norm.trainable() || q_proj.lora || k_proj.lora || v_proj.lora || o_proj.lora || gate_proj.lora ||
           up_proj.lora || down_proj.lora;
  }
};

struct BlockContext {
  const Qwen3Config* config = nullptr;
  const Tensor* positions = nullptr;    // I32 [B, T] on the device
  const Tensor* segment_ids = nullptr;  // optional I32 [B, T]
  const RopeTable* rope = nullptr;
  bool quantize_activations = false;  // W4A4
  // W4A4 on the FP4 tensor cores: the linears whose weight is packed multiply the packed activations with it
  // (nvfp4_w4a4_linear_forward) instead of their values with `use` (needs quantize_activations).
  bool native_w4a4 = false;
  // When set, block_forward records the amax of each projection's input (before any W4A4 fake quantization) under
  // the projection's weight name: activation calibration (io/activation_calibration.h).
  ActivationCalibration* calibration = nullptr;
  LoraPass lora;  // LoRA dropout of this pass (training passes only)
};

// Records max |input| under each weight's name in `calibration` (computed where the tensor lives).
void record_input_amax(ActivationCalibration& calibration, const Tensor& input,
                       std::initializer_list<const std::string*> weight_names);

// What one block's forward writes. With `saved` false (frozen blocks, evaluation) one set is reused by every
// block, x_mid aliases x_in and the block updates its input in place.
struct BlockActivations {
  Tensor x_in, normed_in, q_raw, k_raw, q, k, v, attn, x_mid, normed_mid, gate, up, act;  // compute dtype
  Tensor rstd_in, rstd_q, rstd_k, rstd_mid, lse;                                          // F32
  // Inputs of the linears: the tensors above, or their fake-quantized copies under W4A4.
  Tensor qkv_input, o_input, gate_up_input, down_input;
};

// Allocates a block's activations (x_in is the caller's tensor). saved = false: x_mid aliases x_in.
BlockActivations make_block_activations(const Qwen3Config& config, const Tensor& x_in, bool saved,
                                        bool quantize_activations);

// y = x · Wᵀ for the weight the forward uses, plus its LoRA adapter's term when it has one.
// y = x · w.useᵀ (+ the adapter's term); with native W4A4 and a packed weight, x_packed (x's NVFP4 form, x its values)
// times w.packed on the FP4 tensor cores instead.
void project(const TrainTensor& w, const BlockContext& context, const Tensor& x, Tensor& y,
             const Nvfp4Tensor* x_packed = nullptr);

// out = block(acts.x_in); out may be acts.x_in (in place) when the activations are not saved.
void block_forward(const TrainLayer& layer, const BlockContext& context, BlockActivations& acts, Tensor& out);

// Gradient work space shared by every block's backward.
struct BlockGradBuffers {
  Tensor d_normed, d_q, d_k, d_v, d_attn, d_gate, d_up, d_act;
  // Where a frozen norm's weight gradient goes (LoRA trains adapters under frozen norms; the final norm of a run that
  // trains only the last layers): thrown away.
  Tensor discarded_hidden_norm_grad, discarded_head_norm_grad;
  BlockGradBuffers(const Qwen3Config& config, int64_t batch, int64_t tokens, DType dtype, Device device);
};

// The weight gradient rmsnorm_backward writes for `norm`: its own, or `discarded` when it is frozen (the input
// gradient still flows through it).
Tensor& norm_weight_grad(TrainTensor& norm, Tensor& discarded);

// d_resid: on entry dL/d out, on return dL/d x_in. Accumulates the block's parameter gradients.
void block_backward(TrainLayer& layer, const BlockContext& context, const BlockActivations& acts,
                    BlockGradBuffers& buffers, Tensor& d_resid);

// [B, T, ...] contiguous -> [B*T, features].
Tensor token_rows(const Tensor& t);

}  // namespace nvfp4lm::detail
