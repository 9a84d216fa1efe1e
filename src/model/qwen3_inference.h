// The inference forward pass of Qwen3 (internal to model/: Qwen3Model is the public face). One function runs
// the whole stack for a batch of new tokens, with or without a KV cache, reusing one set of activation buffers
// for every layer.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "core/tensor.h"
#include "io/hf_config.h"
#include "model/kv_cache.h"
#include "model/lora_runtime.h"
#include "model/qwen3_weights.h"
#include "ops/cpu_matmul.h"
#include "ops/int8_lm_head.h"
#include "ops/rope.h"

namespace nvfp4lm::detail {

// State a model keeps between calls (guarded by `mutex` for the duration of a forward).
struct InferenceWorkspace {
  std::mutex mutex;
  std::optional<RopeTable> rope;           // positions [0, rope->max_positions())
  Tensor dequant_scratch;                  // NVFP4 dequantization (ops/nvfp4_linear.h); undefined for dense models
  CpuMatmul cpu_matmul = CpuMatmul::Fp32;  // the CPU linears' kernels (ops/cpu_matmul.h)
  // W4A4 linears with NVFP4 weights run NVFP4 x NVFP4 on the FP4 tensor cores (CUDA, Blackwell: cuda/nvfp4-mma-fp4 on
  // SM 12.x, cuda/nvfp4-cublaslt-fp4 on SM 10.x); otherwise their quantized inputs' values go through the W4A16
  // kernels.
  bool w4a4_native = false;
  // ... and the native path's result for a row does not depend on the other rows (SM 12.x's FP4 GEMM: an order set by
  // k alone). cuBLASLt's choice of algorithm depends on the row count, so on SM 10.x only rows computed as a Batch (no
  // KV cache: scoring, eval) take it; decode and prefill keep the batch-invariant W4A16 kernels on the exact values.
  bool w4a4_native_any_rows = false;
  // Int8Activations on the CPU with a BF16 lm_head: its int8 copy for decode-sized calls (ops/int8_lm_head.h).
  std::shared_ptr<const Int8LmHead> int8_lm_head;

  // Makes sure the RoPE table covers positions [0, positions); grows it to a power of two (at least 4096) if not.
  void ensure_rope(const Qwen3Config& config, int64_t positions, Device device);
};

struct InferenceStep {
  const Tensor* ids = nullptr;          // I32 [B, T] on the model's device
  const Tensor* positions = nullptr;    // I32 [B, T] on the model's device, inside the RoPE table
  const Tensor* segment_ids = nullptr;  // optional I32 [B, T] (no cache)
  KVCache* cache = nullptr;             // optional: keys / values appended at cache->length() (not advanced here)
  bool all_logits = true;               // false: logits of the last position of each row only
  int64_t logit_tokens = 0;             // with all_logits: the last logit_tokens positions of each row (0: all)
  const RopeTable* rope = nullptr;      // default: the workspace's
  // The ids are generated tokens fed back (a decode step): the decode kernels. Otherwise positions going into a cache
  // are prompt positions, computed the same way however the prompt is split (rows_for in qwen3_inference.cpp).
  bool decode = false;
  // Decode form (with a cache, T == 1, !all_logits): nothing the host knows about the cache enters the launches.
  // Row b's history is cache row cache_rows[b] (a slot of a pool that may hold more rows than the step); its key /
  // value go to token slot cache_slots[b] = cache_rows[b] * max_tokens + positions[b, 0] of the cache seen as one
  // row (ops/kv_store.h), and attention runs over that cache row with the query at positions[b, 0]
  // (AttentionOptions::q_start_rows, kv_rows). A CUDA graph captured once replays every step with only these
  // values changed, and sequences at different lengths share one step.
  bool positions_on_device = false;
  const Tensor* cache_rows = nullptr;   // I32 [B] on the model's device (decode form)
  const Tensor* cache_slots = nullptr;  // I32 [B] on the model's device (decode form)
  // LoRA adapters over the base (model/lora_runtime.h): every adapted linear adds its rows' adapter terms, selected by
  // lora_mask [B * T, lora->width()] in the compute dtype on the model's device (each token row its sequence's mask
  // row). Both null: the base alone.
  const LoraAdapterSet* lora = nullptr;
  const Tensor* lora_mask = nullptr;
};

// The activation buffers of one forward, shared by every layer, and its outputs. A caller that passes its own
// (Qwen3DecodeStep) keeps every address fixed across calls.
// Columns of InferenceBuffers::lora_out: the widest output of a decoder linear.
int64_t lora_output_width(const Qwen3Config& config);
// Bytes of the LoRA work space of a forward over `rows` token rows (lora_t, lora_out) and its mask.
uint64_t lora_work_bytes(const Qwen3Config& config, const LoraAdapterSet& lora, int64_t rows, DType dtype);

struct InferenceBuffers {
  Tensor x, normed, q, k, v, attn, proj, gate, up, act;
  Tensor hidden;         // [rows, H]: the final norm of the returned rows
  Tensor logits;         // F32 [rows, V]
  Tensor narrow_logits;  // [rows, V] in the compute dtype when a quantized lm_head writes it (then cast)
  // With LoRA adapters (allocated by the first forward that has them, then kept: a captured graph reuses them):
  Tensor lora_t;    // [B * T, width]: x · A_stackᵀ, then masked
  Tensor lora_out;  // [B * T, widest linear output]: the adapters' term before it is added
  // With W4A4 linears (LinearWeight::input_scale), flat, sized for B * T rows of the widest W4A4 input: the quantized
  // input's codes and block scales, and its values in the compute dtype (where no FP4 tensor cores take the codes).
  Tensor w4a4_codes, w4a4_scales, w4a4_values;
  // Logits (and `hidden`) for every position with all_logits, else for the last; logit_tokens as in InferenceStep.
  InferenceBuffers(const Qwen3Config& config, const Qwen3Weights& weights, int64_t batch, int64_t tokens,
                   bool all_logits, int64_t logit_tokens = 0);
  // What the constructor allocates, in bytes.
  static uint64_t bytes(const Qwen3Config& config, const Qwen3Weights& weights, int64_t batch, int64_t tokens,
                        bool all_logits, int64_t logit_tokens = 0);
};

// Logits F32 [B, T, V] (all_logits) or [B, V] (a view of buffers->logits when given). The workspace's mutex must
// be held.
Tensor qwen3_inference_forward(const Qwen3Config& config, const Qwen3Weights& weights, InferenceWorkspace& workspace,
                               const InferenceStep& step, InferenceBuffers* buffers = nullptr);

}  // namespace nvfp4lm::detail
