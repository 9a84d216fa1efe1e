// Token embedding lookup, forward and backward.
// Op conventions (shared by ops/*.h): outputs are allocated by the caller; backward ops OVERWRITE activation
// gradients (=) and ACCUMULATE parameter gradients (+=); CPU tensors are F32; shape / dtype / device mismatches
// are internal errors (NVFP4LM_ASSERT).
// ids are I32 and contiguous, any shape with N elements (e.g. [B, T]); out / dout are [N, H] or [..., H]
// with N rows (leading dims may have any strides, rows contiguous). Token ids come from data files or
// prompts, so an id outside [0, V) is an Error (user-facing), not an assertion.
#pragma once

#include "core/tensor.h"

namespace nvfp4lm {

// out[i, :] = table[ids[i], :] for table [V, H]. On the CPU the table may also be BF16 (an inference model keeps
// its BF16 embedding as stored; rows are widened to F32 exactly).
void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out);
// dtable[ids[i], :] += dout[i, :]. Repeated ids accumulate; the sum order is fixed (ascending i), so the
// result does not depend on the thread count.
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable);

}  // namespace nvfp4lm
