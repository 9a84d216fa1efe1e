// Batch-invariant kernels on CUDA (`serve` / `generate` / `chat --deterministic`): a process-wide choice, like
// PyTorch's torch.use_deterministic_algorithms or vLLM's VLLM_BATCH_INVARIANT, because it is a property of the
// kernels every op picks, not of one call.
//
// Off (the default), a CUDA kernel may sum a row differently for another number of rows: cuBLASLt picks its
// algorithm by shape, NVFP4 linears of more than kNvfp4GemvMaxRows rows dequantize and call cuBLASLt, attention
// hands a chunk of few query rows to the split-key decode kernel and a long one to the prefill kernel. Answers
// are then equal to `generate` alone up to rounding only.
// On, every row marked LinearRows::Independent or Prefill, and every attention row, is computed by a kernel whose
// order depends on nothing but the row itself (ops/linear_rows.h):
//  - NVFP4 linears: the fused W4A16 kernel (ops/cuda/nvfp4_linear.h) for any number of rows, in groups of 32;
//  - dense linears and the lm_head: the row-exact kernel of ops/cuda/row_exact_linear.h, one thread an output,
//    its inputs in order (CUDA cores, no tensor cores);
//  - attention: prompt rows (AttentionOptions::prompt) always take the tiled prefill kernel, whatever their number.
//    (The decode kernel needs nothing: it splits each row's keys by the row's own length and the GPU's size, not
//    by the batch or the cache's capacity; ops/cuda/attention_decode.cu.)
// So on one GPU an answer is bit for bit the same whatever the prefix cache held, the prefill chunk and the
// sequences beside it. Its cost (predicted, bench/NOTES.md): long prefills of NVFP4 models ~1.5-3x slower (the
// weight is re-read every 32 rows), dense models' prefill far slower (no tensor cores), decode about the same.
// The CPU's kernels are batch-invariant whatever this says.
#pragma once

namespace nvfp4lm {

bool batch_invariant_kernels();
void set_batch_invariant_kernels(bool on);

// Sets the choice for a scope (tests), restoring the previous one after.
class BatchInvariantKernels {
 public:
  explicit BatchInvariantKernels(bool on);
  ~BatchInvariantKernels();
  BatchInvariantKernels(const BatchInvariantKernels&) = delete;
  BatchInvariantKernels& operator=(const BatchInvariantKernels&) = delete;

 private:
  bool previous_;
};

}  // namespace nvfp4lm
