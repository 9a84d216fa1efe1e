// How the CPU runs the matrix products of inference: the NVFP4 projections and a BF16 lm_head (a BF16 embedding
// kept as stored, tied or not). Three compute paths (DESIGN.md §3), chosen per model (ModelOptions::cpu_matmul):
//   Fp32 ("cpu/dequant-gemm", the reference): activations fp32 throughout. Few rows (a decode step): the fused
//     NVFP4 / BF16 dot-product kernels, reading only the packed / BF16 weights; many rows: the weight dequantized
//     (or widened) to fp32 block by block and multiplied by OpenBLAS sgemm.
//   Bf16Activations ("cpu/nvfp4-bf16"): the same few-row kernels (fp32 activations), and for many rows (prefill)
//     each activation rounded to BF16 and multiplied by BF16 weights in cache with fp32 sums (ops/cpu/bf16_gemm.h).
//     NVFP4 weights are exact in BF16, so the only change against the reference is the activations' rounding: a
//     relative error of at most 2^-9 per activation, so each output differs from the reference by at most
//     2^-9 * Σ_k |x_k w_k| plus fp32 summation (tested as such).
//   Int8Activations ("cpu/nvfp4-int8", the default of the commands that generate): prefill as Bf16Activations; few
//     rows (a decode step) multiply the NVFP4 codes by int8 activations in integer dot products (a scale per 16
//     activations, ops/cpu/nvfp4_int8_dot.h, llama.cpp's Q4_0 x Q8_0 scheme): the fp32 kernels are bound by
//     arithmetic on CPUs, the integer ones by memory. On CPUs with AVX-512 VNNI + VBMI a model loaded in this mode
//     holds its NVFP4 weights regrouped 16 rows at a time (ops/cpu/nvfp4_interleaved.h: the same bytes, moved; the
//     prefill reads them too). Each activation moves by at most max|x| / 254 of its block.
//     A BF16 (or F32) lm_head is read in decode steps from an int8 copy made at load (a scale per 16 values,
//     ops/int8_lm_head.h): each of its weights moves by at most half its block's scale.
#pragma once

#include <string_view>

namespace nvfp4lm {

enum class CpuMatmul { Fp32, Bf16Activations, Int8Activations };

std::string_view cpu_matmul_name(CpuMatmul matmul);  // "fp32", "bf16", "int8" (the values of --cpu-matmul)
CpuMatmul parse_cpu_matmul(std::string_view name);   // Error naming the choices for anything else

}  // namespace nvfp4lm
