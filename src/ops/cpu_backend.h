// What the CPU backend runs on, for the reports that name it (diagnose, every command's start, benchmarks): the
// BLAS library's threading and the NVFP4 dot-product kernel this CPU gets. The kernels stay behind ops/'s public
// headers (ops/cpu/ is ops/'s own); callers above ops/ ask here.
#pragma once

#include <string>

#include "ops/cpu_matmul.h"

namespace nvfp4lm {

// How the linked OpenBLAS runs its threads: "OpenMP", "pthreads" or "sequential" (openblas_get_parallel()).
const char* cpu_blas_threading();
// Why the CPU kernels will run slowly with this OpenBLAS ("" when they will not): its pthreads build keeps its
// threads spinning after every call, and nvfp4lm's own OpenMP kernels (dequantize, attention, norms) then fight
// them for the cores (measured 2.7x slower prefill on 2 cores, bench/NOTES.md).
std::string cpu_blas_threading_warning();
// The NVFP4 decode kernel variant this CPU runs in that CpuMatmul mode: fp32 activations ("scalar", "avx2+fma",
// "avx512f"; ops/cpu/nvfp4_dot.h) or, for Int8Activations, int8 ("scalar", "avx2", "avx512vnni";
// ops/cpu/nvfp4_int8_dot.h).
const char* cpu_nvfp4_dot_kernel(CpuMatmul matmul);
// The BF16 kernels' variant (the many-row products of cpu/nvfp4-bf16 and the BF16 lm_head's dot products):
// "avx512bf16", "avx512f", "avx2+fma" or "scalar" (ops/cpu/bf16_gemm.h).
const char* cpu_bf16_kernel();
// ", capped by NVFP4LM_CPU_ISA=avx2" when that variable limits the variants above (ops/cpu/isa_limit.h), else "".
std::string cpu_isa_limit_note();

}  // namespace nvfp4lm
