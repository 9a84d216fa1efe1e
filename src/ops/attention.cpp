// Shape checks and device dispatch for ops/attention.h.
#include "ops/attention.h"

#include <algorithm>
#include <cmath>

#include "ops/cpu/attention.h"
#include "ops/dispatch.h"

#if NVFP4LM_HAS_CUDA
#include <cstdint>

#include "ops/batch_invariance.h"
#include "ops/cuda/attention.h"
#endif

namespace nvfp4lm {
namespace {

void check_attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     const AttentionOptions& options) {
  NVFP4LM_ASSERT(q.rank() == 4 && k.rank() == 4 && v.shape() == k.shape(),
                 "{}: q {}, k {}, v {} must be [B, T, H, D] with v shaped like k", op, q.str(), k.str(), v.str());
  const int64_t batch = q.dim(0), q_len = q.dim(1), q_heads = q.dim(2), dim = q.dim(3);
  const int64_t k_len = k.dim(1), kv_heads = k.dim(2);
  NVFP4LM_ASSERT(
      (k.dim(0) == batch || options.kv_rows != nullptr) && k.dim(3) == dim && kv_heads > 0 && q_heads % kv_heads == 0,
      "{}: q {} and k {} differ in batch or head_dim, or {} q heads are not a multiple of {} kv heads", op, q.str(),
      k.str(), q_heads, kv_heads);
  NVFP4LM_ASSERT(options.q_start >= 0 && options.q_start + q_len <= k_len,
                 "{}: queries at positions [{}, {}) need that many keys, k has {}", op, options.q_start,
                 options.q_start + q_len, k_len);
  NVFP4LM_ASSERT(std::isfinite(options.scale) && options.scale > 0.f, "{}: scale {} must be set (1/sqrt(head_dim))", op,
                 options.scale);
  if (options.segment_ids != nullptr) {
    const Tensor& seg = *options.segment_ids;
    NVFP4LM_ASSERT(options.q_start == 0 && q_len == k_len, "{}: segment_ids need q_start == 0 and Tq == Tk", op);
    NVFP4LM_ASSERT(seg.dtype() == DType::I32 && seg.rank() == 2 && seg.dim(0) == batch && seg.dim(1) == q_len,
                   "{}: segment_ids {} must be I32 [{}, {}]", op, seg.str(), batch, q_len);
  }
  if (options.q_start_rows != nullptr) {
    const Tensor& starts = *options.q_start_rows;
    NVFP4LM_ASSERT(options.segment_ids == nullptr, "{}: q_start_rows and segment_ids do not go together", op);
    NVFP4LM_ASSERT(
        starts.dtype() == DType::I32 && starts.rank() == 1 && starts.dim(0) == batch && starts.is_contiguous(),
        "{}: q_start_rows {} must be contiguous I32 [{}]", op, starts.str(), batch);
  }
  if (options.kv_rows != nullptr) {
    const Tensor& rows = *options.kv_rows;
    NVFP4LM_ASSERT(options.q_start_rows != nullptr, "{}: kv_rows need q_start_rows (the decode form)", op);
    NVFP4LM_ASSERT(rows.dtype() == DType::I32 && rows.rank() == 1 && rows.dim(0) == batch && rows.is_contiguous(),
                   "{}: kv_rows {} must be contiguous I32 [{}]", op, rows.str(), batch);
  }
}

// The CPU runs per-row starts as one call per batch row with the row's own q_start and keys (exact by
// construction); the values are read on the host. A start outside [0, q_start] or a cache row outside k is an
// internal error.
void attention_forward_per_row_cpu(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                                   const AttentionOptions& options, Tensor* lse) {
  const int32_t* starts = static_cast<const int32_t*>(options.q_start_rows->raw());
  const int32_t* kv_rows = options.kv_rows != nullptr ? static_cast<const int32_t*>(options.kv_rows->raw()) : nullptr;
  for (int64_t b = 0; b < q.dim(0); ++b) {
    const int64_t start = starts[b];
    NVFP4LM_ASSERT(start >= 0 && start <= options.q_start,
                   "attention_forward: q_start_rows[{}] = {} is outside [0, {}]", b, start, options.q_start);
    const int64_t kv_row = kv_rows != nullptr ? kv_rows[b] : b;
    NVFP4LM_ASSERT(kv_row >= 0 && kv_row < k.dim(0), "attention_forward: kv_rows[{}] = {} is outside [0, {})", b,
                   kv_row, k.dim(0));
    AttentionOptions row = options;
    row.q_start = start;
    row.q_start_rows = nullptr;
    row.kv_rows = nullptr;
    const int64_t keys = start + q.dim(1);
    Tensor out_row = out.narrow(0, b, 1);
    Tensor lse_row = lse != nullptr ? lse->narrow(0, b, 1) : Tensor();
    cpu::attention_forward(q.narrow(0, b, 1), k.narrow(0, kv_row, 1).narrow(1, 0, keys),
                           v.narrow(0, kv_row, 1).narrow(1, 0, keys), out_row, row,
                           lse != nullptr ? &lse_row : nullptr);
  }
}

void check_lse(const char* op, const Tensor& lse, const Tensor& q) {
  NVFP4LM_ASSERT(lse.dtype() == DType::F32 && lse.rank() == 3 && lse.dim(0) == q.dim(0) && lse.dim(1) == q.dim(2) &&
                     lse.dim(2) == q.dim(1),
                 "{}: lse {} must be F32 [B, Hq, Tq] for q {}", op, lse.str(), q.str());
}

#if NVFP4LM_HAS_CUDA
// The CUDA twin's contract (ops/cuda/attention.h): BF16, [H, D] contiguous per token, 16-byte aligned rows.
cuda::AttentionHeads cuda_heads(const Tensor& t, const char* what) {
  NVFP4LM_ASSERT(t.dtype() == DType::BF16, "{}: {} must be BF16 on CUDA", what, t.str());
  NVFP4LM_ASSERT(t.stride(3) == 1 && (t.dim(2) == 1 || t.stride(2) == t.dim(3)),
                 "{}: {} needs each token's [H, D] contiguous", what, t.str());
  NVFP4LM_ASSERT(reinterpret_cast<uintptr_t>(t.raw()) % 16 == 0 && t.stride(0) % 8 == 0 && t.stride(1) % 8 == 0,
                 "{}: {} must start 16-byte aligned with batch / token strides that are multiples of 8 elements", what,
                 t.str());
  return {t.raw(), t.stride(0), t.stride(1)};
}

cuda::AttentionShape cuda_shape(const char* op, const Tensor& q, const Tensor& k, const AttentionOptions& options) {
  NVFP4LM_CHECK(cuda::attention_head_dim_supported(q.dim(3)),
                "{}: no CUDA kernel for head_dim {} (supported: 16, 64, 128); run on the CPU (--device cpu)", op,
                q.dim(3));
  NVFP4LM_ASSERT(q.dim(1) * q.dim(2) < (int64_t{1} << 30) && k.dim(1) < (int64_t{1} << 30),
                 "{}: q {} / k {} too long for 32-bit row indices", op, q.str(), k.str());
  cuda::AttentionShape shape;
  shape.batch = q.dim(0);
  shape.q_len = q.dim(1);
  shape.k_len = k.dim(1);
  shape.q_heads = q.dim(2);
  shape.kv_heads = k.dim(2);
  shape.head_dim = q.dim(3);
  shape.q_start = options.q_start;
  shape.scale = options.scale;
  shape.batch_invariant = batch_invariant_kernels();
  shape.prompt_rows = options.prompt;
  if (options.q_start_rows != nullptr) {
    shape.q_start_rows = static_cast<const int32_t*>(options.q_start_rows->raw());
    NVFP4LM_ASSERT(cuda::attention_decode_scratch_bytes(shape) > 0,
                   "{}: q_start_rows need the decode kernel (Tq * Hq / Hkv <= 64), got q {}", op, q.str());
  }
  if (options.kv_rows != nullptr) {
    shape.kv_rows = static_cast<const int32_t*>(options.kv_rows->raw());
    shape.kv_batch = k.dim(0);
  }
  if (options.segment_ids != nullptr) {
    NVFP4LM_ASSERT(options.segment_ids->is_contiguous(), "{}: segment_ids {} must be contiguous", op,
                   options.segment_ids->str());
    shape.segment_ids = static_cast<const int32_t*>(options.segment_ids->raw());
  }
  return shape;
}

Tensor cuda_scratch(int64_t bytes, Device device) {
  return bytes > 0 ? Tensor::empty({bytes}, DType::U8, device) : Tensor();
}

void cuda_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                            const AttentionOptions& options, Tensor* lse) {
  const cuda::AttentionShape shape = cuda_shape("attention_forward", q, k, options);
  if (lse != nullptr) NVFP4LM_ASSERT(lse->is_contiguous(), "attention_forward: lse {} must be contiguous", lse->str());
  Tensor scratch = cuda_scratch(
      std::max(cuda::attention_segment_summary_bytes(shape), cuda::attention_decode_scratch_bytes(shape)), q.device());
  cuda::attention_forward(shape, cuda_heads(q, "attention_forward q"), cuda_heads(k, "attention_forward k"),
                          cuda_heads(v, "attention_forward v"), cuda_heads(out, "attention_forward out"),
                          lse != nullptr ? static_cast<float*>(lse->raw()) : nullptr,
                          scratch.defined() ? scratch.raw() : nullptr);
}

void cuda_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                             const Tensor& lse, const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv) {
  NVFP4LM_ASSERT(out.defined() && lse.defined() && lse.is_contiguous(),
                 "attention_backward on CUDA needs the forward's out and (contiguous) lse, got out {} lse {}",
                 out.str(), lse.str());
  const cuda::AttentionShape shape = cuda_shape("attention_backward", q, k, options);
  Tensor scratch = cuda_scratch(cuda::attention_backward_scratch_bytes(shape), q.device());
  cuda::attention_backward(shape, cuda_heads(dout, "attention_backward dout"), cuda_heads(q, "attention_backward q"),
                           cuda_heads(k, "attention_backward k"), cuda_heads(v, "attention_backward v"),
                           cuda_heads(out, "attention_backward out"), static_cast<const float*>(lse.raw()),
                           cuda_heads(dq, "attention_backward dq"), cuda_heads(dk, "attention_backward dk"),
                           cuda_heads(dv, "attention_backward dv"), scratch.raw());
}
#endif

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, const AttentionOptions& options,
                       Tensor* lse) {
  check_attention("attention_forward", q, k, v, options);
  NVFP4LM_ASSERT(out.shape() == q.shape(), "attention_forward: out {} vs q {}", out.str(), q.str());
  if (lse != nullptr) check_lse("attention_forward", *lse, q);
  [[maybe_unused]] const Device device = common_device(
      "attention_forward", {&q, &k, &v, &out, lse, options.segment_ids, options.q_start_rows, options.kv_rows});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) return cuda_attention_forward(q, k, v, out, options, lse);
#endif
  if (options.q_start_rows != nullptr) return attention_forward_per_row_cpu(q, k, v, out, options, lse);
  cpu::attention_forward(q, k, v, out, options, lse);
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv) {
  check_attention("attention_backward", q, k, v, options);
  NVFP4LM_ASSERT(dout.shape() == q.shape() && dq.shape() == q.shape() && dk.shape() == k.shape() &&
                     dv.shape() == v.shape() && (!out.defined() || out.shape() == q.shape()),
                 "attention_backward: dout {}, out {}, dq {}, dk {}, dv {} vs q {}, k {}", dout.str(), out.str(),
                 dq.str(), dk.str(), dv.str(), q.str(), k.str());
  NVFP4LM_ASSERT(options.q_start_rows == nullptr && options.kv_rows == nullptr,
                 "attention_backward: q_start_rows and kv_rows are for the forward only");
  if (lse.defined()) check_lse("attention_backward", lse, q);
  [[maybe_unused]] const Device device =
      common_device("attention_backward", {&dout, &q, &k, &v, &out, &lse, options.segment_ids, &dq, &dk, &dv});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) return cuda_attention_backward(dout, q, k, v, out, lse, options, dq, dk, dv);
#endif
  cpu::attention_backward(dout, q, k, v, lse, options, dq, dk, dv);
}

}  // namespace nvfp4lm
