// CUDA twin of ops/attention.h as raw-pointer launchers (no Tensor, no fmt: ops/attention.cpp checks shapes,
// dtypes and alignment, allocates scratch and calls these). Everything runs on cuda::stream().
//
// Layout (as ops/attention.h): q / out / dout / dq [B, Tq, Hq, D], k / v / dk / dv [B, Tk, Hkv, D], BF16, each
// token's [H, D] contiguous, batch / token strides free (in elements; multiples of 8, base pointers 16-byte
// aligned, so every 8 elements of a head row are one 16-byte load). lse [B, Hq, Tq] F32 contiguous; segment
// ids I32 [B, T] contiguous. head_dim D is 16, 64 or 128 (attention_head_dim_supported).
//
// Kernels (one file each): attention_forward.cu (flash-attention forward, BF16 mma.sync m16n8k16 with fp32
// accumulation, online softmax, prefill and training), attention_decode.cu (flash-decoding: the key range split
// across CTAs, merged by the last CTA of each row group to finish; picked by the forward launcher for few query
// rows), attention_backward.cu
// (flash-attention backward recomputing P from lse; dq through fp32 atomics, so dq is not bit-reproducible
// run to run — dk / dv are: each CTA owns its keys). Shared tile code lives in attention_mma.h.
//
// GQA: a tile's rows are (query, q head) pairs of ONE kv head, row R = t * group + g (group = Hq / Hkv, q head
// kv_head * group + g), so the q heads of a group share every K / V tile load and a decode step with one query
// fills the tile with the group's heads.
#pragma once

#include <cstdint>

namespace nvfp4lm::cuda {

// Rows of a [B, T, H, D] BF16 tensor: element (b, t, h, d) at base + b * batch_stride + t * token_stride + h * D + d.
struct AttentionHeads {
  void* base = nullptr;  // inputs are only read
  int64_t batch_stride = 0;
  int64_t token_stride = 0;
};

struct AttentionShape {
  int64_t batch = 0, q_len = 0, k_len = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  int64_t q_start = 0;                   // query t sits at position q_start + t and sees keys s <= q_start + t
  float scale = 0.f;                     // softmax scale
  const int32_t* segment_ids = nullptr;  // [B, T] or null (then q_start == 0 and Tq == Tk)
  // Device [B] or null: row b's queries start at q_start_rows[b] (clamped to [0, q_start]; q_start is then the
  // largest start the launch is planned for). Read by the kernels, so a captured CUDA graph replays with new
  // cache lengths. Decode path only (attention_decode_scratch_bytes(shape) > 0).
  const int32_t* q_start_rows = nullptr;
  // Device [B] or null: row b reads k / v batch row kv_rows[b] (clamped to [0, kv_batch)), for decode steps over a
  // pool of KV-cache slots. Decode path only, like q_start_rows.
  const int32_t* kv_rows = nullptr;
  int64_t kv_batch = 0;
  // Batch-invariant kernels (ops/batch_invariance.h) and prompt rows: the prefill kernel however few the rows are,
  // so a prompt position's sums do not depend on the chunk it is in (the decode kernel's are another order).
  bool batch_invariant = false;
  bool prompt_rows = false;
};

bool attention_head_dim_supported(int64_t head_dim);

// Segment summaries (the skip test for whole tiles): for every 16 positions of a row, the min and max segment
// id (int2 [B, ceil(T / 16)]). Scratch of attention_segment_summary_bytes() bytes, filled by the forward /
// backward launchers themselves.
int64_t attention_segment_summary_bytes(const AttentionShape& shape);

// Decode scratch: the forward launcher uses the split-key decode kernels when it returns > 0 bytes of scratch
// for this shape (few query rows per kv head, no segments), else 0.
int64_t attention_decode_scratch_bytes(const AttentionShape& shape);

// out = softmax(scale q kᵀ + mask) v (BF16); lse (may be null) = natural log-sum-exp of each row's scores.
// scratch: max(attention_segment_summary_bytes, attention_decode_scratch_bytes) bytes of device memory (null
// when both are 0).
void attention_forward(const AttentionShape& shape, AttentionHeads q, AttentionHeads k, AttentionHeads v,
                       AttentionHeads out, float* lse, void* scratch);

// Backward scratch: delta [B, Hq, Tq] F32, the fp32 dq accumulator [B, Tq, Hq, D] and the segment summaries.
int64_t attention_backward_scratch_bytes(const AttentionShape& shape);

// dq, dk, dv (BF16, overwritten; dk / dv summed over the q heads of each kv head) from dout, q, k, v, the
// forward's out and lse. Keys at positions >= q_start + Tq get zero gradients.
void attention_backward(const AttentionShape& shape, AttentionHeads dout, AttentionHeads q, AttentionHeads k,
                        AttentionHeads v, AttentionHeads out, const float* lse, AttentionHeads dq, AttentionHeads dk,
                        AttentionHeads dv, void* scratch);

}  // namespace nvfp4lm::cuda
