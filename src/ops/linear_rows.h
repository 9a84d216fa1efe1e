// How a linear layer computes the rows of x (linear_forward in gemm.h, nvfp4_linear_forward in nvfp4_linear.h,
// lm_head_logits in cross_entropy.h):
//  - Batch: the fastest way for this many rows (CPU: sgemv for one row, sgemm for more; CUDA: cuBLASLt).
//  - Independent: each row of y exactly as if it were alone, bit for bit, whatever rows come with it: a decode step
//    over several sequences then gives each the logits it would get by itself (infer/batch_engine.h). CPU: the
//    streaming dot-rows kernels (ops/cpu/dense_dot.h, ops/cpu/row_groups.h), which read the weight once for many
//    rows. CUDA: NVFP4 weights the fused W4A16 kernel in groups of 32 rows; dense weights one cuBLASLt call, whose
//    kernel choice may depend on the number of rows, unless the kernels are batch-invariant
//    (ops/batch_invariance.h: then the row-exact kernel of ops/cuda/row_exact_linear.h).
//  - Prefill: prompt positions going into a KV cache. Each row as if it were alone, as Independent, and computed by
//    the same kernel whatever the number of rows, so a position gets the same bits from a whole-prompt prefill, a
//    chunk of one token or the uncached tail of a prefix-cache hit (infer/batch_engine.h). CPU: the many-row kernel
//    of the CpuMatmul (the BF16 tiles of ops/cpu/bf16_gemm.h, whose lanes are rows) for any N, where Batch takes
//    the decode kernels for N <= kNvfp4FusedMaxRows; Fp32 and dense F32 weights, whose sgemm is not row-exact, take
//    the dot-rows kernels of Independent. CUDA: as Batch (tensor-core GEMMs whose order depends on the shape, and
//    attention hands few query rows to the decode kernel) unless the kernels are batch-invariant; then as
//    Independent for any N, and attention takes the prefill kernel for the prompt rows (AttentionOptions::prompt).
#pragma once

namespace nvfp4lm {

enum class LinearRows { Batch, Independent, Prefill };

}  // namespace nvfp4lm
