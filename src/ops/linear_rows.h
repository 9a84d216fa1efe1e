// How a linear layer computes the rows of x (linear_forward in gemm.h, nvfp4_linear_forward in nvfp4_linear.h,
// lm_head_logits in cross_entropy.h):
//  - Batch: the fastest way for this many rows (CPU: sgemv for one row, sgemm for more; CUDA: cuBLASLt).
//  - Independent: each row of y exactly as if it were alone, bit for bit, whatever rows come with it: a decode step
//    over several sequences then gives each the logits it would get by itself (infer/batch_engine.h). CPU: the
//    streaming dot-rows kernels (ops/cpu/dense_dot.h, ops/cpu/row_groups.h), which read the weight once for many
//    rows. CUDA: dense weights still go through one cuBLASLt call, whose kernel choice may depend on the number of
//    rows, so there it is independent only as far as cuBLASLt's kernels are (docs/DESIGN.md §3).
#pragma once

namespace nvfp4lm {

enum class LinearRows { Batch, Independent };

}  // namespace nvfp4lm
