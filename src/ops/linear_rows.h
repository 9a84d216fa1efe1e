// How a linear layer computes the rows of x (linear_forward in gemm.h, nvfp4_linear_forward in nvfp4_linear.h,
// lm_head_logits in cross_entropy.h):
//  - Batch: the fastest way for this many rows (CPU: sgemv for one row, sgemm for more; CUDA: cuBLASLt).
//  - Independent: each row of y exactly as if it were alone, bit for bit, whatever rows come with it: a decode step
//    over several sequences then gives each the logits it would get by itself (infer/batch_engine.h). CPU: the
//    streaming dot-rows kernels (ops/cpu/dense_dot.h, ops/cpu/row_groups.h), which read the weight once for many
//    rows. CUDA: dense weights still go through one cuBLASLt call, whose kernel choice may depend on the number of
//    rows, so there it is independent only as far as cuBLASLt's kernels are (docs/DESIGN.md §3).
//  - Prefill: prompt positions going into a KV cache. Each row as if it were alone, as Independent, and computed by
//    the same kernel whatever the number of rows, so a position gets the same bits from a whole-prompt prefill, a
//    chunk of one token or the uncached tail of a prefix-cache hit (infer/batch_engine.h). CPU: the many-row kernel
//    of the CpuMatmul (the BF16 tiles of ops/cpu/bf16_gemm.h, whose lanes are rows) for any N, where Batch takes
//    the decode kernels for N <= kNvfp4FusedMaxRows; Fp32 and dense F32 weights, whose sgemm is not row-exact, take
//    the dot-rows kernels of Independent. CUDA: as Batch. There a chunk's result depends on its size whatever the
//    linears do: attention hands few query rows to the decode kernel (ops/cuda/attention_forward.cu), and cuBLASLt
//    (the emulated device's sgemm too) may sum a row differently for another row count.
#pragma once

namespace nvfp4lm {

enum class LinearRows { Batch, Independent, Prefill };

}  // namespace nvfp4lm
