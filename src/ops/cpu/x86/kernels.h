// The x86 variants of the CPU kernel families (this folder; the portable ones and each family's table of variants are
// in ops/cpu/): each function returns one variant's kernels for its family's table. Built where the compiler has
// the x86 intrinsics (NVFP4LM_X86_INTRINSICS, ops/cpu/x86/simd.h); the CPU features each needs are in its family's
// table.
#pragma once

#include "ops/cpu/bf16_dot.h"
#include "ops/cpu/bf16_gemm.h"
#include "ops/cpu/dense_dot.h"
#include "ops/cpu/int8_weight_dot.h"
#include "ops/cpu/nvfp4_dot.h"
#include "ops/cpu/nvfp4_int8_dot.h"
#include "ops/cpu/nvfp4_interleaved.h"
#include "ops/cpu/x86/simd.h"

#if NVFP4LM_X86_INTRINSICS
namespace nvfp4lm::cpu::x86 {

RowKernels<Nvfp4DotFn> nvfp4_dot_avx2();
RowKernels<Nvfp4DotFn> nvfp4_dot_avx512();

RowKernels<DenseDotFn> dense_dot_avx2();
RowKernels<DenseDotFn> dense_dot_avx512();

RowKernels<Bf16DotFn> bf16_dot_avx2();
RowKernels<Bf16DotFn> bf16_dot_avx512();

RowKernels<Int8DotFn> nvfp4_int8_dot_avx2();
RowKernels<Int8DotFn> nvfp4_int8_dot_avx512vnni();

RowKernels<Int8WeightDotFn> int8_weight_dot_avx2();
RowKernels<Int8WeightDotFn> int8_weight_dot_avx512vnni();

RowKernels<InterleavedDotFn> nvfp4_interleaved_avx512vnni();

Bf16GemmKernels bf16_gemm_avx2();
Bf16GemmKernels bf16_gemm_avx512();
Bf16GemmKernels bf16_gemm_avx512bf16();

}  // namespace nvfp4lm::cpu::x86
#endif
