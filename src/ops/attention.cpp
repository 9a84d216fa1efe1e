// Shape checks and device dispatch for ops/attention.h.
#include "ops/attention.h"

#include <cmath>

#include "ops/cpu/attention.h"
#include "ops/dispatch.h"

namespace nvfp4lm {
namespace {

void check_attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     const AttentionOptions& options) {
  NVFP4LM_ASSERT(q.rank() == 4 && k.rank() == 4 && v.shape() == k.shape(),
                 "{}: q {}, k {}, v {} must be [B, T, H, D] with v shaped like k", op, q.str(), k.str(), v.str());
  const int64_t batch = q.dim(0), q_len = q.dim(1), q_heads = q.dim(2), dim = q.dim(3);
  const int64_t k_len = k.dim(1), kv_heads = k.dim(2);
  NVFP4LM_ASSERT(k.dim(0) == batch && k.dim(3) == dim && kv_heads > 0 && q_heads % kv_heads == 0,
                 "{}: q {} and k {} differ in batch or head_dim, or {} q heads are not a multiple of {} kv heads", op,
                 q.str(), k.str(), q_heads, kv_heads);
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
}

void check_lse(const char* op, const Tensor& lse, const Tensor& q) {
  NVFP4LM_ASSERT(lse.dtype() == DType::F32 && lse.rank() == 3 && lse.dim(0) == q.dim(0) && lse.dim(1) == q.dim(2) &&
                     lse.dim(2) == q.dim(1),
                 "{}: lse {} must be F32 [B, Hq, Tq] for q {}", op, lse.str(), q.str());
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, const AttentionOptions& options,
                       Tensor* lse) {
  check_attention("attention_forward", q, k, v, options);
  NVFP4LM_ASSERT(out.shape() == q.shape(), "attention_forward: out {} vs q {}", out.str(), q.str());
  if (lse != nullptr) check_lse("attention_forward", *lse, q);
  [[maybe_unused]] const Device device =
      common_device("attention_forward", {&q, &k, &v, &out, lse, options.segment_ids});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("attention_forward");  // -> cuda::attention_forward(...); return;
#endif
  cpu::attention_forward(q, k, v, out, options, lse);
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv) {
  check_attention("attention_backward", q, k, v, options);
  NVFP4LM_ASSERT(dout.shape() == q.shape() && dq.shape() == q.shape() && dk.shape() == k.shape() &&
                     dv.shape() == v.shape() && (!out.defined() || out.shape() == q.shape()),
                 "attention_backward: dout {}, out {}, dq {}, dk {}, dv {} vs q {}, k {}", dout.str(), out.str(),
                 dq.str(), dk.str(), dv.str(), q.str(), k.str());
  if (lse.defined()) check_lse("attention_backward", lse, q);
  [[maybe_unused]] const Device device =
      common_device("attention_backward", {&dout, &q, &k, &v, &out, &lse, options.segment_ids, &dq, &dk, &dv});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("attention_backward");  // -> cuda::attention_backward(...); return;
#endif
  cpu::attention_backward(dout, q, k, v, lse, options, dq, dk, dv);
}

}  // namespace nvfp4lm
