// fp32 arithmetic rounded to nearest after every single operation, with the same bits on the host and the device.
//
// Why: nvcc contracts a * b + c into one FMA (one rounding instead of two) whenever it can, the CPU build never does
// (ISO C++20 mode, GCC's -ffp-contract=off, and no FMA in the baseline x86-64 target). The optimizer's element math
// (adamw_math.h, moment_quant.h) is written with these helpers so that its CUDA twin writes the same bits as the CPU
// reference. On the device they are the _rn intrinsics, which are never contracted, and IEEE division and square
// root even if a file were built with --use_fast_math; on the host they are the plain operators.
#pragma once

#include <cmath>

#include "core/numeric.h"  // NVFP4LM_HD

namespace nvfp4lm {

NVFP4LM_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

NVFP4LM_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

NVFP4LM_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

NVFP4LM_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

NVFP4LM_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// |a| by clearing the sign bit (what std::fabs does, NaN included), usable in device code.
NVFP4LM_HD float abs_bits(float a) { return bits_float(float_bits(a) & 0x7fffffffu); }

}  // namespace nvfp4lm
