// The linear layer with an NVFP4 weight kept packed in memory: y [N, out] = x [N, in] · deq(w)ᵀ, where
// deq(w) = e2m1 code * e4m3 block scale * tensor scale (quant/nvfp4.h). Forward only (inference; training
// keeps fp32 masters and uses ops/gemm.h on the dequantized weight).
//
// Compute paths (DESIGN.md §3), chosen by the operands' device (and on the CPU by CpuMatmul, ops/cpu_matmul.h):
//  - CPU, "cpu/nvfp4-int8" (CpuMatmul::Int8Activations): few rows (decode) in integer dot products of the codes with
//    int8-quantized activations (ops/cpu/nvfp4_int8_dot.h; on the interleaved layout of nvfp4_for_cpu_int8_decode,
//    ops/cpu/nvfp4_interleaved.h, where the CPU has AVX-512 VNNI + VBMI); many rows as "cpu/nvfp4-bf16".
//  - CPU, "cpu/nvfp4-bf16" (CpuMatmul::Bf16Activations): for N > kNvfp4FusedMaxRows rows, blocks of 6 weight rows
//    are dequantized to BF16 in cache (exact) and multiplied with the BF16-rounded activations, fp32 sums, the tensor
//    scale applied to them (ops/cpu/bf16_gemm.h); few rows as below.
//  - CPU, "cpu/dequant-gemm" (CpuMatmul::Fp32, the reference): for N > kNvfp4FusedMaxRows rows the weight is
//  dequantized into the caller's F32
//    scratch and multiplied with OpenBLAS sgemm (in blocks of output rows when the scratch holds less than the
//    whole weight, e.g. a 150k-row quantized lm_head); for the few rows of a decode step each thread
//    dequantizes one weight row at a time into an L1-resident buffer and takes its dot products with x, so
//    only the packed bytes (0.5625 bytes per weight) cross the memory bus. Both paths dequantize with the same
//    products as dequantize_nvfp4, so they agree up to fp32 summation order.
//  - CUDA (ops/cuda/nvfp4_linear.h): the fused W4A16 kernel ("cuda/nvfp4-w4a16") for the few rows of a decode
//    step, dequantization into the BF16 `scratch` + cuBLASLt ("cuda/dequant-gemm") for more rows. This call is
//    also the seam for a Blackwell FP4 tensor-core GEMM (W4A4 with the activations quantized on the fly): callers
//    never change; they pass x, the packed weight, y and one scratch buffer sized by
//    nvfp4_linear_scratch_elements for the largest linear they run.
// Op conventions (shared by ops/*.h): outputs are allocated by the caller; CPU tensors are F32; shape / dtype /
// device mismatches are internal errors (NVFP4LM_ASSERT). x / y may be row-strided 2-D views or contiguous
// [..., features] tensors (flattened to rows).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/tensor.h"
#include "ops/cpu_matmul.h"
#include "ops/linear_rows.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

// Up to this many rows of x use the CPU's fused row-by-row path; more rows dequantize the whole weight once. (CUDA's
// fused kernel takes up to 32: ops/cuda/nvfp4_linear.h.)
inline constexpr int64_t kNvfp4FusedMaxRows = 8;

// y = x · deq(w)ᵀ. scratch: contiguous, F32 on the CPU (BF16 on CUDA), on w's device, with at least one weight
// row (w.cols elements); nvfp4_linear_scratch_elements(w) elements dequantize the weight in one pass. Its
// contents are overwritten (it is work space, reused across layers). rows (ops/linear_rows.h): Independent takes
// the fused path for any number of rows (CPU: row_groups.h; CUDA: the fused kernel 32 rows at a time), so each
// row's result is what it would be alone. `matmul` chooses the CPU path of Batch rows (ignored on CUDA, which computes
// in BF16 anyway); the BF16 path needs no scratch beyond one weight row.
void nvfp4_linear_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& y, Tensor& scratch,
                          LinearRows rows = LinearRows::Batch, CpuMatmul matmul = CpuMatmul::Fp32);

// For a CPU inference model under CpuMatmul::Int8Activations: w in the layout the decode step's integer kernel reads
// fastest (Nvfp4Layout::Interleaved16: 16 rows' codes and scales together, ops/cpu/nvfp4_interleaved.h) where this
// CPU runs that kernel (AVX-512 VNNI + VBMI); w itself elsewhere. The same bytes, moved (a copy: the caller drops
// w). Only nvfp4_linear_forward with Int8Activations or Bf16Activations reads the result.
Nvfp4Tensor nvfp4_for_cpu_int8_decode(const Nvfp4Tensor& w);

// ---- decode-step fusions (CUDA's fused kernel, ops/cuda/nvfp4_linear.h) -----------------------------------------
// One launch each instead of the op sequence in their comments, with that sequence's results (the products rounded
// to BF16 where the sequence stores them). Only where nvfp4_decode_fusions_supported() says so: CUDA, BF16 rows of
// x (any count: 32 at a time, each row computed as if alone) and weights the fused kernel takes. Callers run the
// op sequence otherwise (the CPU always).
bool nvfp4_decode_fusions_supported(const Tensor& x, std::initializer_list<const Nvfp4Tensor*> weights);
// y_i = x · deq(w_i)ᵀ for the 2 or 3 weights (q, k, v): one launch.
void nvfp4_linears_forward(const Tensor& x, std::initializer_list<std::pair<const Nvfp4Tensor*, Tensor*>> outputs);
// residual += x · deq(w)ᵀ (linear, then add_inplace).
void nvfp4_linear_add_forward(const Tensor& x, const Nvfp4Tensor& w, Tensor& residual);
// out = silu(x · deq(gate)ᵀ) * (x · deq(up)ᵀ) (two linears, then swiglu_forward).
void nvfp4_swiglu_forward(const Tensor& x, const Nvfp4Tensor& gate, const Nvfp4Tensor& up, Tensor& out);

// Elements of scratch that dequantize w in one pass (rows * cols).
int64_t nvfp4_linear_scratch_elements(const Nvfp4Tensor& w);

// The compute path NVFP4 linears take on `device` ("cpu/dequant-gemm", "cpu/nvfp4-bf16", "cuda/nvfp4-w4a16"), or
// throws the Error that says why none can run there (CUDA: no kernel yet).
const char* nvfp4_linear_compute_path(Device device, CpuMatmul matmul = CpuMatmul::Fp32);

}  // namespace nvfp4lm
