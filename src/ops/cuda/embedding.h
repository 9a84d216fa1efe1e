// CUDA twin of ops/embedding.h as raw-pointer launchers (ops/embedding.cpp checks and dispatches), plus the row
// gather the fused cross-entropy reuses.
// Dtypes: table / out F32 or BF16 in any combination (converted on the fly); dout F32 or BF16; dtable F32
// (parameter gradient, accumulated +=). ids I32 on the device.
// Out-of-range ids: the forward does not synchronise, so it cannot throw at once: the kernel writes a zero row
// for such an id and records it (ops/cuda/input_errors.h), and the dispatcher reports it at its next call (or at
// the loss, which synchronises). The backward copies the ids to the host anyway (below), so the dispatcher
// validates them there and throws before launching, exactly like the CPU.
// Backward, deterministic and atomic-free: the host sorts the positions by token id (a stable sort: positions
// ascending within an id) and uploads the buckets; one block per distinct id walks its rows in ascending
// position order, adding into dtable's row in fp32 starting from its current value. That is the CPU's summation
// order, so with F32 dout the result is bitwise the CPU's. Costs one host round trip of the ids per call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/cuda/rows.h"

namespace nvfp4lm::cuda {

// out row i = table row ids[i] (table: evenly spaced rows); an id outside [0, table.count) gives a zero row and,
// when error_slot is set, is recorded there. Also used to compact the hidden rows of the fused cross-entropy.
void gather_rows(const int32_t* ids, const DeviceRows& table, const DeviceRows& out, unsigned long long* error_slot);

// gather_rows with the embedding's error slot.
void embedding_forward(const int32_t* ids, const DeviceRows& table, const DeviceRows& out);

// Device scratch embedding_backward needs for `count` ids.
size_t embedding_backward_scratch_bytes(int64_t count);
// dtable[ids[i]] += dout[i]; host_ids: the ids (already validated against dtable.count) in host memory.
void embedding_backward(const int32_t* host_ids, int64_t count, const DeviceRows& dout, const DeviceRows& dtable,
                        void* scratch);

}  // namespace nvfp4lm::cuda
