// Writing new keys / values into a KV cache at slots held in a tensor: cache[b, slots[b, t]] = fresh[b, t].
// The slots live with the data (on the device for CUDA), so a decode step captured in a CUDA graph writes each
// replay's token where that replay's slot says, with no host value baked into the graph.
//   fresh [B, T, H, D], cache [B, S, H, D] (same dtype; each token's [H, D] contiguous, batch / token strides
//   free), slots I32 [B, T] contiguous, each in [0, S).
// Op conventions as ops/*.h: shapes, dtypes and devices are internal contracts (NVFP4LM_ASSERT). A slot outside
// [0, S) is an internal error on the CPU; the CUDA kernel cannot throw and skips that token's write.
#pragma once

#include "core/tensor.h"

namespace nvfp4lm {

void store_kv_rows(const Tensor& fresh, Tensor& cache, const Tensor& slots);

}  // namespace nvfp4lm
