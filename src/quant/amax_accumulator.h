// The running amax of a weight, as a kernel or loop that writes or reads the weight folds it in: max |x| over the
// finite elements and the lowest flat index of a non-finite one. One record for the quantizer's amax kernel
// (quant/cuda/nvfp4.cu) and for the optimizers, which measure the masters they write (quant/master_amax.h
// UpdatedMasterAmaxes), so the QAT refresh need not read them again.
//
// The record is 16 bytes and lives where the weight lives. On the GPU threads fold into it with atomicMax on the
// amax's bits (non-negative floats order like their bit patterns, so the integer maximum is the float maximum) and
// atomicMin on the index: both are exact and independent of order and launch shape, so the result equals the CPU's
// tensor_amax (quant/tensor_amax.h) bit for bit. This header is plain C++ usable from .cu files (no Tensor).
#pragma once

#include <cstdint>

#include "core/numeric.h"  // NVFP4LM_HD, float_bits

namespace nvfp4lm {

struct AmaxAccumulator {
  unsigned int amax_bits = 0;  // max |x| over the finite elements as float bits (0: all zero, or none yet)
  unsigned int unused = 0;
  unsigned long long first_non_finite = ~0ull;  // lowest flat index of an inf / NaN element; all ones: none
};
static_assert(sizeof(AmaxAccumulator) == 16, "the record is 16 bytes on host and device");

inline constexpr unsigned long long kNoNonFinite = ~0ull;

// Folds element `index` (value `value`) into a thread's or loop's running pair: |value| into `amax` when finite,
// else `index` into `first_non_finite`. The rule of tensor_amax: NaN and +-inf are the non-finite ones.
NVFP4LM_HD void fold_magnitude(float value, unsigned long long index, float& amax,
                               unsigned long long& first_non_finite) {
  const float magnitude = bits_float(float_bits(value) & 0x7fffffffu);
  if (magnitude <= 3.402823466e+38f) {  // FLT_MAX; false for NaN
    amax = magnitude > amax ? magnitude : amax;
  } else if (index < first_non_finite) {
    first_non_finite = index;
  }
}

// Folds a running pair into a record in host memory (the CPU loops, after their OpenMP reductions).
inline void fold_into(AmaxAccumulator& record, float amax, unsigned long long first_non_finite) {
  const unsigned int bits = float_bits(amax);
  if (bits > record.amax_bits) record.amax_bits = bits;
  if (first_non_finite < record.first_non_finite) record.first_non_finite = first_non_finite;
}

}  // namespace nvfp4lm
