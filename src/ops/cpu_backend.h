// What the CPU backend runs on, for the reports that name it (diagnose, every command's start, benchmarks): the
// BLAS library's threading, the CPU features the kernels use and the variant of every kernel family this CPU gets
// (ops/cpu/cpu_features.h, ops/cpu/kernel_family.h). The kernels stay behind ops/'s public
// headers (ops/cpu/ is ops/'s own); callers above ops/ ask here.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ops/cpu_matmul.h"

namespace nvfp4lm {

// How the linked OpenBLAS runs its threads: "OpenMP", "pthreads" or "sequential" (openblas_get_parallel()).
const char* cpu_blas_threading();
// Why the CPU kernels will run slowly with this OpenBLAS ("" when they will not): its pthreads build keeps its
// threads spinning after every call, and nvfp4lm's own OpenMP kernels (dequantize, attention, norms) then fight
// them for the cores (measured 2.7x slower prefill on 2 cores, bench/NOTES.md).
std::string cpu_blas_threading_warning();
// The NVFP4 decode kernel variant this CPU runs in that CpuMatmul mode: fp32 activations ("scalar", "avx2+fma",
// "avx512f"; ops/cpu/nvfp4_dot.h) or, for Int8Activations, int8 ("scalar", "avx2+fma", "neon+dotprod", ...;
// ops/cpu/nvfp4_int8_dot.h), or on weights interleaved 16 rows at a time where that family has a variant for this
// CPU ("avx512vnni+vbmi, 16-row interleaved", "neon+i8mm, 16-row interleaved"; ops/cpu/nvfp4_interleaved.h).
std::string cpu_nvfp4_dot_kernel(CpuMatmul matmul);
// The BF16 kernels' variant (the many-row products of cpu/nvfp4-bf16): "avx512bf16", "avx512f", "avx2+fma",
// "neon+bf16" or "scalar" (ops/cpu/bf16_gemm.h).
const char* cpu_bf16_kernel();
// ", capped by NVFP4LM_CPU_ISA=avx2" when that variable limits the variants (ops/cpu/cpu_features.h), else "".
std::string cpu_isa_limit_note();
// The CPU features the kernels use that this CPU has ("avx2 fma avx512f ..."; "" when none or not x86).
std::string cpu_kernel_features();
// Every CPU kernel family and the variant it runs here, under the cap: {"nvfp4 dot", "avx512f"}, ...,
// {"attention", "x86-64-v4"}.
std::vector<std::pair<std::string, std::string>> cpu_kernel_variants();

}  // namespace nvfp4lm
