// The AArch64 variants of the CPU kernel families (this folder; the portable ones and each family's table of
// variants are in ops/cpu/): each function returns one variant's kernels for its family's table. Built where the
// compiler has the AArch64 intrinsics (NVFP4LM_ARM_INTRINSICS, ops/cpu/arm/simd.h); the ISA each needs is in its
// family's table (ops/cpu/cpu_features.h: kNeonIsa, kNeonDotIsa, kNeonI8mmIsa, kNeonBf16Isa).
//
// Every integer variant sums in the portable variant's fp32 order, so its outputs equal the portable ones bit for
// bit (the integer block sums are exact whatever the instruction); the BF16 GEMM's BFMMLA variant cannot (the
// instruction rounds its own sums: ops/cpu/arm/bf16_gemm.cpp states the bound).
#pragma once

#include "ops/cpu/arm/simd.h"
#include "ops/cpu/bf16_gemm.h"
#include "ops/cpu/int8_weight_dot.h"
#include "ops/cpu/nvfp4_int8_dot.h"
#include "ops/cpu/nvfp4_interleaved.h"

#if NVFP4LM_ARM_INTRINSICS
namespace nvfp4lm::cpu::arm {

RowKernels<Int8DotFn> nvfp4_int8_dot_neon();
RowKernels<Int8DotFn> nvfp4_int8_dot_dotprod();

RowKernels<InterleavedDotFn> nvfp4_interleaved_neon();
RowKernels<InterleavedDotFn> nvfp4_interleaved_dotprod();
RowKernels<InterleavedDotFn> nvfp4_interleaved_i8mm();

RowKernels<Int8WeightDotFn> int8_weight_dot_neon();
RowKernels<Int8WeightDotFn> int8_weight_dot_dotprod();

Bf16GemmKernels bf16_gemm_bf16();

}  // namespace nvfp4lm::cpu::arm
#endif
