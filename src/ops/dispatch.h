// Device dispatch for ops. Every public op (ops/<op>.h) is defined in ops/<op>.cpp as: validate shapes
// (device-independent), find the one device all operands share (common_device), then call either the CPU
// reference cpu::<op> (ops/cpu/<op>.h) or the CUDA twin cuda::<op> (ops/cuda/<op>.h). That choice is made
// in exactly one line per op so adding a CUDA twin means changing that line only.
#pragma once

#include <initializer_list>

#include "core/device.h"
#include "core/tensor.h"

namespace nvfp4lm {

// The device of the defined tensors in `operands` (null pointers and undefined tensors are skipped);
// asserts that they all live on the same device. `op` names the op in the message.
Device common_device(const char* op, std::initializer_list<const Tensor*> operands);

// [..., features] -> [N, features] for the linear ops; rank-2 views pass through untouched (they may be
// row-strided); higher ranks must be contiguous.
Tensor flatten_rows(const Tensor& t, const char* what);

}  // namespace nvfp4lm
