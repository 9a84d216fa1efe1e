// Inference forward of Qwen3 (see qwen3_inference.h and DESIGN.md §3), layer by layer:
//   x = embed(ids)
//   per layer: h = rmsnorm(x); q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ; q, k = rope(rmsnorm_head(q)), rope(rmsnorm_head(k));
//              [cache: k, v stored at the cache's length]; x += attn(q, k, v)·Woᵀ;
//              h = rmsnorm(x); x += (silu(h·Wgateᵀ) * h·Wupᵀ)·Wdownᵀ
//   logits = rmsnorm(x)·lm_headᵀ, for the rows that are returned only.
// q, k, v, gate and up live in separate contiguous buffers so that K / V rows can be copied into the cache with
// plain (per batch row contiguous) copies on any device. A decode step on CUDA (one token a row, NVFP4 weights)
// fuses q/k/v, o_proj + residual add, gate/up + SwiGLU and down_proj + residual add into one launch each, with the
// same results (ops/nvfp4_linear.h). With LoRA adapters (InferenceStep::lora) each adapted linear adds its rows'
// adapter terms right after the base's output (add_lora); gate / up with adapters are then not fused. Activations are
// in the weights' compute dtype; norm weights are F32.
#include "model/qwen3_inference.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/kv_store.h"
#include "ops/nvfp4_linear.h"
#include "ops/nvfp4_w4a4_linear.h"
#include "ops/qk_norm_rope_store.h"
#include "ops/rmsnorm.h"
#include "ops/swiglu.h"

namespace nvfp4lm::detail {
namespace {

// What every linear of a layer is computed with.
struct LinearSetting {
  Tensor& scratch;  // NVFP4 dequantization (InferenceWorkspace::dequant_scratch)
  LinearRows rows;
  CpuMatmul matmul;
  InferenceBuffers& buf;  // W4A4 inputs
  bool native_w4a4;       // the FP4 tensor cores take this step's W4A4 linears (InferenceWorkspace)
};

// y [N, out] = x [N, in] · Wᵀ for a dense or packed NVFP4 weight, x as given.
void apply_w4a16_linear(const LinearWeight& weight, const Tensor& x, Tensor& y, const LinearSetting& s) {
  if (weight.is_nvfp4()) {
    nvfp4_linear_forward(x, weight.nvfp4, y, s.scratch, s.rows, s.matmul);
  } else {
    linear_forward(x, weight.dense, y, s.rows);
  }
}

// A W4A4 linear: x's rows quantized to NVFP4 with the checkpoint's fixed input_scale (quantize_nvfp4_static, as vLLM
// and TensorRT-LLM quantize a calibrated checkpoint's activations), then NVFP4 x NVFP4 on the FP4 tensor cores
// (ops/nvfp4_w4a4_linear.h: SM 12.x's mma, SM 10.x's through cuBLASLt) where the device has them. Elsewhere the
// quantized values go through the W4A16 kernels as code x E4M3 block scale — at most 6 significant bits, exact in BF16
// — with input_scale folded into the weight's tensor scale as the FP4 GEMM folds both into alpha: the same exact
// products, fp32 sums in the kernel's order (CPU int8 decode kernels would round them again: those linears take the
// BF16 ones). A dense weight (the dequantized parity paths) gets the values with input_scale applied. Rows are
// quantized independently, so a row's result does not depend on its batch where the product's does not (rows_for:
// cuBLASLt's FP4 matmul only for Batch rows).
void apply_w4a4_linear(const LinearWeight& weight, const Tensor& x, Tensor& y, const LinearSetting& s) {
  const int64_t in = weight.in_features, rows = x.numel() / in;
  const Tensor x_rows = x.reshape({rows, in});
  Nvfp4Tensor quantized;
  quantized.codes = s.buf.w4a4_codes.narrow(0, 0, rows * in / 2).reshape({rows, in / 2});
  quantized.block_scales =
      s.buf.w4a4_scales.narrow(0, 0, rows * in / kNvfp4BlockSize).reshape({rows, in / kNvfp4BlockSize});
  quantize_nvfp4_static(x_rows, weight.input_scale, quantized);
  if (s.native_w4a4 && weight.is_nvfp4()) {
    Tensor y_rows = y.reshape({rows, weight.out_features});
    nvfp4_w4a4_linear_forward(quantized, weight.nvfp4, y_rows);
    return;
  }
  Tensor values = s.buf.w4a4_values.narrow(0, 0, rows * in).reshape({rows, in});
  if (!weight.is_nvfp4()) {
    dequantize_nvfp4(quantized, values);
    linear_forward(values, weight.dense, y, s.rows);
    return;
  }
  quantized.tensor_scale = 1.0f;
  dequantize_nvfp4(quantized, values);
  Nvfp4Tensor w = weight.nvfp4;
  w.tensor_scale = weight.nvfp4.tensor_scale * weight.input_scale;
  const CpuMatmul matmul = s.matmul == CpuMatmul::Int8Activations ? CpuMatmul::Bf16Activations : s.matmul;
  nvfp4_linear_forward(values, w, y, s.scratch, s.rows, matmul);
}

void apply_linear(const LinearWeight& weight, const Tensor& x, Tensor& y, const LinearSetting& s) {
  if (weight.is_w4a4())
    apply_w4a4_linear(weight, x, y, s);
  else
    apply_w4a16_linear(weight, x, y, s);
}

// Whether any of the linears is W4A4 (CUDA's fused decode kernels are W4A16 only).
bool any_w4a4(std::initializer_list<const LinearWeight*> linears) {
  return std::any_of(linears.begin(), linears.end(), [](const LinearWeight* linear) { return linear->is_w4a4(); });
}

// Which kernels compute the step's rows (ops/linear_rows.h). Generated tokens (a decode step): Independent, so a
// sequence decoded next to others gets exactly the logits it gets by itself. Prompt positions going into a cache:
// Prefill, so a position gets the same bits whether the whole prompt, a chunk of it or the tail after a prefix-cache
// hit computed it. Without a cache (scoring, evaluation): the fastest, Batch; one token alone is Independent.
LinearRows rows_for(const InferenceStep& step, int64_t tokens) {
  if (step.decode) return LinearRows::Independent;
  if (step.cache != nullptr) return LinearRows::Prefill;
  return tokens == 1 ? LinearRows::Independent : LinearRows::Batch;
}

// [B, ...] cache tensor -> [1, B * S, ...]: the token slots of every cache row as one row (contiguous cache).
Tensor as_one_row(Tensor& cache) { return cache.reshape({1, cache.dim(0) * cache.dim(1), cache.dim(2), cache.dim(3)}); }

// [B, T, ...] -> [B*T, features] (the buffers are contiguous).
Tensor rows_of(const Tensor& t) { return t.reshape({t.dim(0) * t.dim(1), t.numel() / (t.dim(0) * t.dim(1))}); }

// Copies this step's keys or values [B, T, Hkv, D] into the cache at [start, start + T), one batch row at a time
// (each row's slot is contiguous in the cache).
void store_in_cache(const Tensor& fresh, Tensor& cached, int64_t start) {
  for (int64_t b = 0; b < fresh.dim(0); ++b) {
    Tensor slot = cached.select(0, b).narrow(0, start, fresh.dim(1));
    slot.copy_from(fresh.select(0, b));
  }
}

// y += the LoRA term of each row's adapter (model/lora_runtime.h): ((x · A_stackᵀ) ⊙ mask) · B_stackᵀ.
void add_lora(const InferenceStep& step, InferenceBuffers& buf, int64_t layer, LoraTarget target, const Tensor& x,
              Tensor& y, LinearRows rows) {
  if (step.lora == nullptr) return;
  const LoraStack& stack = step.lora->stack(layer, target);
  if (!stack.defined()) return;
  linear_forward(x, stack.a, buf.lora_t, rows);
  mul_inplace(buf.lora_t, *step.lora_mask);
  Tensor out = buf.lora_out.narrow(1, 0, y.dim(1));
  linear_forward(buf.lora_t, stack.b, out, rows);
  add_inplace(y, out);
}

// Whether any adapter of the step sits on one of `targets` in `layer` (a fused decode kernel that hides the linear's
// output cannot take one).
bool has_lora(const InferenceStep& step, int64_t layer, std::initializer_list<LoraTarget> targets) {
  if (step.lora == nullptr) return false;
  return std::any_of(targets.begin(), targets.end(),
                     [&](LoraTarget target) { return step.lora->stack(layer, target).defined(); });
}

// q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ: one launch in a decode step on CUDA (ops/nvfp4_linear.h's fusions), three linears
// otherwise.
void qkv_projections(const Qwen3LayerWeights& w, const Tensor& normed, Tensor& q, Tensor& k, Tensor& v,
                     const LinearSetting& s) {
  if (s.rows == LinearRows::Independent && !any_w4a4({&w.q_proj, &w.k_proj, &w.v_proj}) &&
      nvfp4_decode_fusions_supported(normed, {&w.q_proj.nvfp4, &w.k_proj.nvfp4, &w.v_proj.nvfp4})) {
    nvfp4_linears_forward(normed, {{&w.q_proj.nvfp4, &q}, {&w.k_proj.nvfp4, &k}, {&w.v_proj.nvfp4, &v}});
    return;
  }
  apply_linear(w.q_proj, normed, q, s);
  apply_linear(w.k_proj, normed, k, s);
  apply_linear(w.v_proj, normed, v, s);
}

// residual += x·Wᵀ: one launch in a decode step on CUDA, a linear into `proj` and an add otherwise.
void project_and_add(const LinearWeight& weight, const Tensor& x, Tensor& residual, Tensor& proj,
                     const LinearSetting& s) {
  if (s.rows == LinearRows::Independent && !weight.is_w4a4() && nvfp4_decode_fusions_supported(x, {&weight.nvfp4})) {
    nvfp4_linear_add_forward(x, weight.nvfp4, residual);
    return;
  }
  apply_linear(weight, x, proj, s);
  add_inplace(residual, proj);
}

// act = silu(h·Wgateᵀ + LoRA) * (h·Wupᵀ + LoRA): one launch in a decode step on CUDA without adapters on gate / up,
// two linears and the SwiGLU otherwise.
void gated_activation(const Qwen3LayerWeights& w, const Tensor& normed, Tensor& gate, Tensor& up, Tensor& act,
                      const LinearSetting& s, const InferenceStep& step, int64_t layer) {
  if (s.rows == LinearRows::Independent && !has_lora(step, layer, {LoraTarget::Gate, LoraTarget::Up}) &&
      !any_w4a4({&w.gate_proj, &w.up_proj}) &&
      nvfp4_decode_fusions_supported(normed, {&w.gate_proj.nvfp4, &w.up_proj.nvfp4})) {
    nvfp4_swiglu_forward(normed, w.gate_proj.nvfp4, w.up_proj.nvfp4, act);
    return;
  }
  apply_linear(w.gate_proj, normed, gate, s);
  add_lora(step, s.buf, layer, LoraTarget::Gate, normed, gate, s.rows);
  apply_linear(w.up_proj, normed, up, s);
  add_lora(step, s.buf, layer, LoraTarget::Up, normed, up, s.rows);
  swiglu_forward(gate, up, act);
}

void decoder_layer(const Qwen3Config& config, const Qwen3LayerWeights& w, int layer, const InferenceStep& step,
                   const RopeTable& rope, InferenceWorkspace& workspace, InferenceBuffers& buf) {
  const auto eps = static_cast<float>(config.rms_norm_eps);
  const LinearRows rows = rows_for(step, buf.x.dim(1));
  const bool native_w4a4 = workspace.w4a4_native && (workspace.w4a4_native_any_rows || rows == LinearRows::Batch);
  const LinearSetting linears{workspace.dequant_scratch, rows, workspace.cpu_matmul, buf, native_w4a4};
  rmsnorm_forward(buf.x, w.input_norm, eps, buf.normed);
  const Tensor normed = rows_of(buf.normed);
  Tensor q2 = rows_of(buf.q), k2 = rows_of(buf.k), v2 = rows_of(buf.v);
  qkv_projections(w, normed, q2, k2, v2, linears);
  add_lora(step, buf, layer, LoraTarget::Q, normed, q2, rows);
  add_lora(step, buf, layer, LoraTarget::K, normed, k2, rows);
  add_lora(step, buf, layer, LoraTarget::V, normed, v2, rows);
  AttentionOptions options;
  options.scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
  options.segment_ids = step.segment_ids;
  options.prompt = step.cache != nullptr && !step.decode;
  Tensor keys = buf.k, values = buf.v;
  Tensor q_starts;
  if (step.positions_on_device) {
    // QK-norm, RoPE and the KV-cache store: one launch on CUDA (ops/qk_norm_rope_store.h).
    const int64_t batch = buf.k.dim(0);
    Tensor cache_keys = as_one_row(step.cache->keys(layer)), cache_values = as_one_row(step.cache->values(layer));
    qk_norm_rope_store(buf.q, buf.k, buf.v, w.q_norm, w.k_norm, eps, *step.positions, rope, cache_keys, cache_values,
                       step.cache_slots->reshape({1, batch}));
    keys = step.cache->keys(layer);
    values = step.cache->values(layer);
    q_starts = step.positions->reshape({batch});  // T == 1: one start per row, contiguous
    options.q_start = step.cache->max_tokens() - 1;
    options.q_start_rows = &q_starts;
    options.kv_rows = step.cache_rows;
  } else {
    rmsnorm_forward(buf.q, w.q_norm, eps, buf.q);
    rmsnorm_forward(buf.k, w.k_norm, eps, buf.k);
    rope_forward(buf.q, *step.positions, rope);
    rope_forward(buf.k, *step.positions, rope);
  }
  if (!step.positions_on_device && step.cache != nullptr) {
    const int64_t start = step.cache->length();
    store_in_cache(buf.k, step.cache->keys(layer), start);
    store_in_cache(buf.v, step.cache->values(layer), start);
    keys = step.cache->keys(layer).narrow(1, 0, start + buf.k.dim(1));
    values = step.cache->values(layer).narrow(1, 0, start + buf.k.dim(1));
    options.q_start = start;
  }
  attention_forward(buf.q, keys, values, buf.attn, options);
  Tensor proj = rows_of(buf.proj), residual = rows_of(buf.x);
  const Tensor attn = rows_of(buf.attn);
  project_and_add(w.o_proj, attn, residual, proj, linears);
  add_lora(step, buf, layer, LoraTarget::O, attn, residual, rows);

  rmsnorm_forward(buf.x, w.post_attention_norm, eps, buf.normed);
  Tensor gate = rows_of(buf.gate), up = rows_of(buf.up), act = rows_of(buf.act);
  gated_activation(w, normed, gate, up, act, linears, step, layer);
  project_and_add(w.down_proj, act, residual, proj, linears);
  add_lora(step, buf, layer, LoraTarget::Down, act, residual, rows);
}

// The LoRA work space of `buf` (once: a decode step's captured graph keeps these addresses).
void ensure_lora_buffers(const Qwen3Config& c, const LoraAdapterSet& lora, InferenceBuffers& buf) {
  const int64_t rows = buf.x.dim(0) * buf.x.dim(1);
  if (buf.lora_t.defined() && buf.lora_t.dim(1) == lora.width()) return;
  buf.lora_t = Tensor::empty({rows, lora.width()}, buf.x.dtype(), buf.x.device());
  buf.lora_out = Tensor::empty({rows, lora_output_width(c)}, buf.x.dtype(), buf.x.device());
}

}  // namespace

int64_t lora_output_width(const Qwen3Config& c) {
  return std::max(
      {c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim, c.hidden_size, c.intermediate_size});
}

uint64_t lora_work_bytes(const Qwen3Config& config, const LoraAdapterSet& lora, int64_t rows, DType dtype) {
  return static_cast<uint64_t>(rows * (2 * lora.width() + lora_output_width(config))) * dtype_bytes(dtype);
}

void InferenceWorkspace::ensure_rope(const Qwen3Config& config, int64_t positions, Device device) {
  if (rope && rope->max_positions() >= positions) return;
  rope.emplace(config.head_dim, static_cast<float>(config.rope_theta), rope_table_positions(positions), device);
}

InferenceBuffers::InferenceBuffers(const Qwen3Config& c, const Qwen3Weights& weights, int64_t batch, int64_t tokens,
                                   bool all_logits, int64_t logit_tokens) {
  const Device device = weights.embed_tokens.device();
  // The compute dtype (the CPU keeps a BF16 embedding as stored but computes in F32).
  const DType dtype = device.is_cpu() ? DType::F32 : weights.embed_tokens.dtype();
  x = Tensor::empty({batch, tokens, c.hidden_size}, dtype, device);
  normed = Tensor::empty({batch, tokens, c.hidden_size}, dtype, device);
  q = Tensor::empty({batch, tokens, c.num_attention_heads, c.head_dim}, dtype, device);
  k = Tensor::empty({batch, tokens, c.num_key_value_heads, c.head_dim}, dtype, device);
  v = Tensor::empty({batch, tokens, c.num_key_value_heads, c.head_dim}, dtype, device);
  attn = Tensor::empty({batch, tokens, c.num_attention_heads, c.head_dim}, dtype, device);
  proj = Tensor::empty({batch, tokens, c.hidden_size}, dtype, device);
  gate = Tensor::empty({batch, tokens, c.intermediate_size}, dtype, device);
  up = Tensor::empty({batch, tokens, c.intermediate_size}, dtype, device);
  act = Tensor::empty({batch, tokens, c.intermediate_size}, dtype, device);
  const int64_t rows = all_logits ? batch * (logit_tokens > 0 ? logit_tokens : tokens) : batch;
  hidden = Tensor::empty({rows, c.hidden_size}, dtype, device);
  logits = Tensor::empty({rows, c.vocab_size}, DType::F32, device);
  if (weights.lm_head.is_nvfp4() && dtype != DType::F32)
    narrow_logits = Tensor::empty({rows, c.vocab_size}, dtype, device);
  if (const int64_t w4a4_in = weights.w4a4_max_in_features(); w4a4_in > 0) {
    const int64_t elements = batch * tokens * w4a4_in;
    w4a4_codes = Tensor::empty({elements / 2}, DType::E2M1x2, device);
    w4a4_scales = Tensor::empty({elements / kNvfp4BlockSize}, DType::E4M3, device);
    w4a4_values = Tensor::empty({elements}, dtype, device);
  }
}

uint64_t InferenceBuffers::bytes(const Qwen3Config& c, const Qwen3Weights& weights, int64_t batch, int64_t tokens,
                                 bool all_logits, int64_t logit_tokens) {
  const DType dtype = weights.embed_tokens.dtype();
  const auto activations = static_cast<uint64_t>(batch * tokens *
                                                 (3 * c.hidden_size + 2 * c.num_attention_heads * c.head_dim +
                                                  2 * c.num_key_value_heads * c.head_dim + 3 * c.intermediate_size));
  const auto rows = static_cast<uint64_t>(all_logits ? batch * (logit_tokens > 0 ? logit_tokens : tokens) : batch);
  uint64_t bytes = (activations + rows * static_cast<uint64_t>(c.hidden_size)) * dtype_bytes(dtype) +
                   rows * static_cast<uint64_t>(c.vocab_size) * dtype_bytes(DType::F32);
  if (weights.lm_head.is_nvfp4() && dtype != DType::F32)
    bytes += rows * static_cast<uint64_t>(c.vocab_size) * dtype_bytes(dtype);
  if (const int64_t w4a4_in = weights.w4a4_max_in_features(); w4a4_in > 0) {
    const auto elements = static_cast<uint64_t>(batch * tokens * w4a4_in);
    bytes += elements * dtype_bytes(dtype) + elements / 2 + elements / kNvfp4BlockSize;
  }
  return bytes;
}

Tensor qwen3_inference_forward(const Qwen3Config& config, const Qwen3Weights& weights, InferenceWorkspace& workspace,
                               const InferenceStep& step, InferenceBuffers* buffers) {
  const Tensor& ids = *step.ids;
  const int64_t batch = ids.dim(0), tokens = ids.dim(1);
  NVFP4LM_ASSERT(!step.positions_on_device || (step.cache != nullptr && tokens == 1 && !step.all_logits &&
                                               step.cache_rows != nullptr && step.cache_slots != nullptr),
                 "qwen3_inference_forward: the decode form needs a cache, its rows and slots, one token per row and "
                 "last logits, got {}",
                 ids.str());
  std::optional<InferenceBuffers> own;
  NVFP4LM_ASSERT(step.logit_tokens >= 0 && step.logit_tokens <= tokens,
                 "qwen3_inference_forward: {} logit tokens of {}", step.logit_tokens, tokens);
  const int64_t logit_tokens = step.logit_tokens > 0 ? step.logit_tokens : tokens;
  if (buffers == nullptr) buffers = &own.emplace(config, weights, batch, tokens, step.all_logits, logit_tokens);
  InferenceBuffers& buf = *buffers;
  NVFP4LM_ASSERT(buf.x.dim(0) == batch && buf.x.dim(1) == tokens, "qwen3_inference_forward: buffers {} for ids {}",
                 buf.x.str(), ids.str());
  const RopeTable& rope = step.rope != nullptr ? *step.rope : *workspace.rope;
  NVFP4LM_ASSERT((step.lora == nullptr) == (step.lora_mask == nullptr), "qwen3_inference_forward: LoRA without a mask");
  if (step.lora != nullptr) {
    NVFP4LM_ASSERT(step.lora_mask->rank() == 2 && step.lora_mask->dim(0) == batch * tokens &&
                       step.lora_mask->dim(1) == step.lora->width() && step.lora_mask->dtype() == buf.x.dtype(),
                   "qwen3_inference_forward: LoRA mask {} for {} rows of width {}", step.lora_mask->str(),
                   batch * tokens, step.lora->width());
    ensure_lora_buffers(config, *step.lora, buf);
  }

  embedding_forward(ids, weights.embed_tokens, buf.x);
  for (size_t layer = 0; layer < weights.layers.size(); ++layer)
    decoder_layer(config, weights.layers[layer], static_cast<int>(layer), step, rope, workspace, buf);

  // Only the returned rows go through the final norm and the lm_head; one row per sequence (the last position)
  // is computed row by row as in a decode step.
  Tensor last;  // [rows, H]
  if (!step.all_logits) {
    last = buf.x.select(1, tokens - 1);
  } else if (logit_tokens == tokens) {
    last = rows_of(buf.x);
  } else {
    // Each batch row's tail is contiguous; gathered row by row (a strided copy does not exist on every device).
    Tensor tail = Tensor::empty({batch, logit_tokens, config.hidden_size}, buf.x.dtype(), buf.x.device());
    for (int64_t b = 0; b < batch; ++b)
      tail.select(0, b).copy_from(buf.x.select(0, b).narrow(0, tokens - logit_tokens, logit_tokens));
    last = rows_of(tail);
  }
  // Prefill rows of the lm_head are Independent: the same kernel for a whole prompt's logits and one row's.
  const LinearRows head_rows =
      step.all_logits && rows_for(step, tokens) == LinearRows::Batch ? LinearRows::Batch : LinearRows::Independent;
  rmsnorm_forward(last, weights.final_norm, static_cast<float>(config.rms_norm_eps), buf.hidden);
  if (weights.lm_head.is_nvfp4()) {
    if (!buf.narrow_logits.defined()) {
      nvfp4_linear_forward(buf.hidden, weights.lm_head.nvfp4, buf.logits, workspace.dequant_scratch, head_rows,
                           workspace.cpu_matmul);
    } else {
      nvfp4_linear_forward(buf.hidden, weights.lm_head.nvfp4, buf.narrow_logits, workspace.dequant_scratch, head_rows,
                           workspace.cpu_matmul);
      cast(buf.narrow_logits, buf.logits);
    }
  } else if (workspace.int8_lm_head && (head_rows == LinearRows::Independent || last.dim(0) <= kNvfp4FusedMaxRows)) {
    workspace.int8_lm_head->logits(buf.hidden, buf.logits);
  } else {
    lm_head_logits(buf.hidden, weights.lm_head.dense, buf.logits, head_rows, workspace.cpu_matmul);
  }
  return step.all_logits ? buf.logits.reshape({batch, logit_tokens, config.vocab_size}) : buf.logits;
}

}  // namespace nvfp4lm::detail
