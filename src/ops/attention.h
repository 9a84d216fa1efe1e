// Causal grouped-query attention (GQA) with optional packing segments and a query offset (KV-cache decode),
// forward and backward, softmax in fp32.
//   q [B, Tq, Hq, D], k / v [B, Tk, Hkv, D], out [B, Tq, Hq, D]; Hq % Hkv == 0, q head h reads kv head
//   h / (Hq / Hkv). Batch and token strides are free (each token's [H, D] must be contiguous), so q/k/v can be
//   narrow()ed views of a fused q|k|v projection and k/v views of a KV cache [B, Tmax, Hkv, D].
//   Query t sits at absolute position q_start + t and attends keys s <= q_start + t (so Tk >= q_start + Tq).
//   With segment_ids (I32 [B, T], contiguous; only with q_start == 0 and Tq == Tk) it attends only keys with
//   its own segment id: samples packed into one row do not see each other.
//   out = softmax(scale * q kᵀ + mask) v;  lse [B, Hq, Tq] = log-sum-exp of each query's scaled scores.
// Op conventions (shared by ops/*.h): outputs are allocated by the caller; backward ops OVERWRITE activation
// gradients (=) and ACCUMULATE parameter gradients (+=); CPU tensors are F32; shape / dtype / device mismatches
// are internal errors (NVFP4LM_ASSERT).
// The backward overwrites dq, dk, dv (dk / dv sum over the q heads that share a kv head; they may be views into
// one fused gradient buffer). Keys / values in [0, q_start + Tq) must be finite even where masked.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace nvfp4lm {

struct AttentionOptions {
  float scale = 0.f;  // softmax scale, 1/sqrt(D) for Qwen3; must be set
  int64_t q_start = 0;
  const Tensor* segment_ids = nullptr;
  // Per-row query starts held on the device (forward only, no segments): I32 [B], contiguous; row b's queries
  // sit at q_start_rows[b] + t, each value in [0, q_start] (q_start is then the largest start, and k must hold
  // q_start + Tq keys). For decode steps replayed from a captured CUDA graph: the cache length changes without
  // the host launching anything new. On CUDA only for decode-sized queries (Tq * Hq / Hkv <= 64).
  const Tensor* q_start_rows = nullptr;
  // Per-row cache rows (forward only, with q_start_rows): I32 [B] on the device, contiguous; row b reads keys and
  // values from batch row kv_rows[b] of k / v, which may then hold any number of rows (a pool of KV-cache slots,
  // one per sequence of a batched decode step). Each value in [0, k.dim(0)); on CUDA a value outside is clamped.
  const Tensor* kv_rows = nullptr;
  // The query rows are prompt positions going into a KV cache (forward only): with batch-invariant kernels
  // (ops/batch_invariance.h) CUDA computes them with the prefill kernel whatever their number, so a position gets
  // the same bits in a whole prompt, a chunk of it or the tail after a prefix-cache hit. Ignored otherwise.
  bool prompt = false;
};

// lse (F32 [B, Hq, Tq], contiguous) is optional; the backward can use it to skip re-normalising.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, const AttentionOptions& options,
                       Tensor* lse = nullptr);

// dout, out: [B, Tq, Hq, D]; lse as saved by the forward. The CPU reference recomputes the probabilities
// and needs neither out nor lse (either may be an undefined Tensor; lse saves one pass when given); the
// CUDA twin may require them.
void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace nvfp4lm
