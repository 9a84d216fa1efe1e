// CUDA twin of ops/swiglu.h as raw-pointer launchers (ops/swiglu.cpp checks and dispatches).
//   out = silu(gate) * up;   dup = dout * silu(gate),   dgate = dout * up * sig * (1 + gate * (1 - sig))
// All operands are DeviceRows of one dtype, F32 or BF16 (the fast path), math in fp32; row strides are free, so
// gate and up may be the two halves of a fused [N, gate|up] buffer. Every element is read before it is written:
// outputs may alias inputs element for element (dgate / dup over gate / up). Runs on cuda::stream().
#pragma once

#include "ops/cuda/rows.h"

namespace nvfp4lm::cuda {

void swiglu_forward(const DeviceRows& gate, const DeviceRows& up, const DeviceRows& out);
void swiglu_backward(const DeviceRows& dout, const DeviceRows& gate, const DeviceRows& up, const DeviceRows& dgate,
                     const DeviceRows& dup);

}  // namespace nvfp4lm::cuda
