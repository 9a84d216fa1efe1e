// Bad user data found by a kernel. Token ids and positions live on the device, so checking them on the host
// would cost a synchronisation per call; instead the embedding-forward and RoPE kernels guard every access
// (an out-of-range id gives a zero row, an out-of-range position leaves the token unrotated) and record the
// offending (row, value) in a slot of pinned host memory mapped into the device. The dispatchers report a
// recorded error as an Error at their next call, and the ops that synchronise anyway (embedding backward,
// lm_head cross-entropy) report it right after their synchronisation, so a training step with a bad id fails
// at its loss, before any weight is updated. Whoever needs certainty calls throw_pending_input_errors() after
// cuda::synchronize().
// No Tensor and no fmt here (kernels use the slot pointers); the throwing part is host code (input_errors.cpp).
#pragma once

#include <cstdint>

namespace nvfp4lm::cuda {

enum class InputErrorKind : int { EmbeddingId = 0, RopePosition = 1 };

// Device-visible pointer to the slot of `kind` (created on first use, kept for the process).
unsigned long long* input_error_slot(InputErrorKind kind);

// Records the limit the values were checked against, for the message (e.g. the vocabulary size).
void set_input_error_limit(InputErrorKind kind, int64_t limit);

// Throws Error describing (and clears) any recorded bad input; returns when there is none.
void throw_pending_input_errors();

}  // namespace nvfp4lm::cuda
